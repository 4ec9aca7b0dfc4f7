"""A fake vast.ai HTTP API on 127.0.0.1, for tests: the endpoints the `vastai` SDK calls, with faults.

    from rl.devops.vast.testing import fake_api

    with fake_api.FakeVastApi(api_key="k" * 32, offers=[fake_api.offer(1, machine_id=10)]) as server:
        sdk = vastai.VastAI(api_key="k" * 32, server_url=server.url)
        server.add_fault("PUT", r"/asks/", fake_api.Fault.status(429), times=1)   # 429, then success
        sdk.create_instance(id=1, image="img", onstart_cmd="...")
        server.set_logs(instance_id, "RLH_DONE exit_code=0\\n")
        server.requests        # every request: method, path, query, headers, JSON body

Endpoints (paths as the SDK 1.9 builds them, see vastai/api/{offers,instances}.py):

| SDK call | request | answer |
|---|---|---|
| search_offers | POST /api/v0/bundles/ (filter dict, order, limit) | {"offers": [...]} filtered, ordered, limited |
| create_instance | PUT /api/v0/asks/<offer>/ (image, env, onstart, label, ...) | {"success": true, "new_contract": <id>}; a rented or unknown offer: 404 no_such_ask |
| show_instance | GET /api/v0/instances/<id>/?owner=me | {"instances": row} or {"instances": null} |
| show_instances | GET /api/v1/instances/?select_filters&order_by&limit[&after_token] | {"instances": page, "next_token": ...} |
| destroy_instance | DELETE /api/v0/instances/<id>/ | {"success": true}; unknown: 404 |
| logs | PUT /api/v0/instances/request_logs/<id>/ {"tail"} | {"result_url": <url>}; GET <url> gives the text |
| (an instance ending itself) | DELETE /api/v0/instances/<its id>/ with its CONTAINER_API_KEY | as destroy_instance; any other request with that key: 401 |

A create with `price` rents the offer as an interruptible instance at that bid (at least the
offer's `min_bid`, else 400). Each instance gets a key of its own (`container_key(id)`), which vast.ai
gives the container as CONTAINER_API_KEY; it may destroy that instance and do nothing else.
`preempt(id)` stops an instance as an outbid one is stopped, and `bill()` is what the account was
charged: each instance's price from its creation until it was destroyed (a stopped one bills on, as
vast.ai bills its disk, at its full price here: an upper bound). `hosts` are told of each create,
stop and destroy (`testing/fake_hosts.py` runs each instance as a local process).

Every /api call needs `Authorization: Bearer <api_key>` (else 401). An instance
is "loading" until `boot_delay_s` has passed, then "running" — except on a
machine of `never_boot_machines`, where it stays "loading" — unless `set_status`
fixed its status (an instance that "exited" or went "offline"). Faults
(`add_fault`) answer a matching request instead of the endpoint, `times`
times: a status code (429 with Retry-After, 500, ...), a delay longer than the
client's timeout, a status code answered after the endpoint acted (a 502 from
a gateway after the instance was made: a retry would rent twice), or a 500
whose body echoes the request's credentials (a careless server), to prove the
client redacts what comes back.

The server binds 127.0.0.1 only, and shuts itself down after `lifetime_s`
even if a test forgets to stop it. Prices are taken as given (`dph_total` is
not recomputed for the requested disk).
"""

from __future__ import annotations

import dataclasses
import http.server
import itertools
import json
import pathlib
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

LOOPBACK = "127.0.0.1"

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda value, wanted: value == wanted,
    "neq": lambda value, wanted: value != wanted,
    "gt": lambda value, wanted: value > wanted,
    "gte": lambda value, wanted: value >= wanted,
    "lt": lambda value, wanted: value < wanted,
    "lte": lambda value, wanted: value <= wanted,
    "in": lambda value, wanted: value in wanted,
    "notin": lambda value, wanted: value not in wanted,
}
_QUERY_CONTROL_KEYS = {"order", "type", "limit", "allocated_storage", "disable_bundling"}


def offer(offer_id: int, **fields) -> dict:
    """An offer row that passes the library's default gates unless `fields` say otherwise."""
    row = {
        "id": offer_id,
        "ask_contract_id": offer_id,
        "machine_id": 1000 + offer_id,
        "host_id": 500 + offer_id,
        "num_gpus": 1,
        "gpu_name": "RTX 4090",
        "gpu_ram": 24564,
        "cuda_max_good": 13.0,
        "driver_version": "580.95.05",
        "reliability": 0.995,
        "verified": True,
        "rentable": True,
        "rented": False,
        "external": False,
        "disk_space": 200.0,
        "cpu_cores_effective": 16.0,
        "cpu_ram": 64000,
        "dlperf": 60.0,
        "dph_total": 0.40,
        "geolocation": "XX",
    }
    row.update(fields)
    row.setdefault("min_bid", round(row["dph_total"] / 2, 3))
    return row


@dataclasses.dataclass
class Fault:
    """What a faulty endpoint does instead of answering. Build with the class methods."""

    kind: str
    code: int = 500
    seconds: float = 0.0
    retry_after: float | None = None

    @classmethod
    def status(cls, code: int, *, retry_after: float | None = 0.0) -> Fault:
        return cls(kind="status", code=code, retry_after=retry_after if code == 429 else None)

    @classmethod
    def delay(cls, seconds: float) -> Fault:
        return cls(kind="delay", seconds=seconds)

    @classmethod
    def echo_credentials(cls, code: int = 500) -> Fault:
        return cls(kind="echo", code=code)

    @classmethod
    def after_acting(cls, code: int) -> Fault:
        """The endpoint acts (an instance is made), then `code` is answered: a gateway lost the answer."""
        return cls(kind="after", code=code)


@dataclasses.dataclass
class _FaultRule:
    method: str
    path: re.Pattern
    fault: Fault
    times: int


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict
    headers: dict
    body: Any


class FakeVastApi:
    """The fake server (see the module docstring). Use as a context manager, or start()/stop()."""

    def __init__(
        self,
        api_key: str,
        offers: list[dict] = (),
        *,
        boot_delay_s: float = 0.0,
        never_boot_machines: frozenset = frozenset(),
        lifetime_s: float = 120.0,
        max_delay_s: float = 5.0,
    ):
        self.api_key = api_key
        self.offers = {row["id"]: dict(row) for row in offers}
        self.instances: dict[int, dict] = {}
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0  # the most requests handled at once (proves parallel clients)
        self._in_flight = 0
        self.boot_delay_s = boot_delay_s
        self.never_boot_machines = set(never_boot_machines)
        self._lifetime_s = lifetime_s
        self._max_delay_s = max_delay_s
        self._faults: list[_FaultRule] = []
        self._logs: dict[int, str] = {}
        self._statuses: dict[int, str] = {}
        self._log_urls: dict[str, tuple[int, int | None]] = {}
        self._ids = itertools.count(70001)
        self._container_keys: dict[int, str] = {}
        self.offers_of: dict[int, int] = {}  # instance id: the offer it rented (rentable again once destroyed)
        self._billed: dict[int, list] = {}  # id: [price per hour, created at, destroyed at or None]
        self.log_files: dict[int, pathlib.Path] = {}  # an instance's log read from a file (a fake host's)
        self.hosts: list = []  # objects with created(row), stopped(id), destroyed(id)
        self._lock = threading.RLock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._watchdog: threading.Timer | None = None

    # ---- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> FakeVastApi:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = http.server.ThreadingHTTPServer((LOOPBACK, 0), handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._watchdog = threading.Timer(self._lifetime_s, self.stop)
        self._watchdog.daemon = True
        self._watchdog.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if self._watchdog is not None:
            self._watchdog.cancel()
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> FakeVastApi:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # ---- test controls -----------------------------------------------------------------------------------

    def add_fault(self, method: str, path_pattern: str, fault: Fault, *, times: int = 1) -> None:
        """The next `times` requests with `method` and a path matching `path_pattern` get `fault`."""
        with self._lock:
            self._faults.append(_FaultRule(method.upper(), re.compile(path_pattern), fault, times))

    def set_logs(self, instance_id: int, text: str) -> None:
        with self._lock:
            self._logs[instance_id] = text

    def set_status(self, instance_id: int, actual_status: str) -> None:
        """From now on the instance reports `actual_status` (e.g. "exited", "offline") whatever its boot."""
        with self._lock:
            self._statuses[instance_id] = actual_status

    def preempt(self, instance_id: int) -> None:
        """The instance is stopped, as an outbid interruptible one is; its hosts stop its process (SIGKILL)."""
        self.set_status(instance_id, "stopped")
        for host in self.hosts:
            host.stopped(instance_id)

    def container_key(self, instance_id: int) -> str:
        with self._lock:
            return self._container_keys[instance_id]

    def bill(self, now: float | None = None) -> float:
        """Dollars charged so far: each instance's price per hour over its life (creation to destruction)."""
        now = time.time() if now is None else now
        with self._lock:
            return sum(price * ((ended or now) - created) / 3600 for price, created, ended in self._billed.values())

    def calls(self, method: str, path_pattern: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == method and re.search(path_pattern, r.path)]

    # ---- request handling (called from the handler threads) -----------------------------------------------

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for rule in self._faults:
                if rule.times > 0 and rule.method == method and rule.path.search(path):
                    rule.times -= 1
                    return rule.fault
        return None

    def _row(self, instance: dict) -> dict:
        booted = (
            time.time() - instance["start_date"] >= self.boot_delay_s
            and instance["machine_id"] not in self.never_boot_machines
        )
        status = self._statuses.get(instance["id"], "running" if booted else "loading")
        return {**instance, "actual_status": status, "status_msg": "pulling image" if status == "loading" else status}

    def handle(self, method: str, path: str, query: dict, headers: dict, body: Any) -> tuple[int, Any, dict]:
        """(status, JSON-able body or text, extra headers) for one request."""
        with self._lock:
            self.requests.append(RecordedRequest(method, path, query, headers, body))
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            return self._answer(method, path, query, headers, body)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, method: str, path: str, query: dict, headers: dict, body: Any) -> tuple[int, Any, dict]:
        if path.startswith("/fake-logs/"):
            return self._serve_log(path.rsplit("/", 1)[1])
        authorization = headers.get("authorization")
        if authorization != f"Bearer {self.api_key}":
            with self._lock:
                own = next((i for i, key in self._container_keys.items() if authorization == f"Bearer {key}"), None)
            if own is None or (method, path) != ("DELETE", f"/api/v0/instances/{own}/"):
                return 401, {"success": False, "error": "invalid_api_key", "msg": "bad or missing API key"}, {}
        fault = self._take_fault(method, path)
        if fault is not None:
            if fault.kind == "delay":
                time.sleep(min(fault.seconds, self._max_delay_s))
            elif fault.kind == "after":
                self._route(method, path, query, body)
                return fault.code, {"error": f"injected_{fault.code}", "msg": "injected fault after acting"}, {}
            elif fault.kind == "echo":
                return (
                    fault.code,
                    {
                        "error": "server_error",
                        "msg": f"failed {method} {path} with Authorization: {headers.get('authorization')}"
                        f" api_key={self.api_key}",
                    },
                    {},
                )
            else:
                extra = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
                return fault.code, {"error": f"injected_{fault.code}", "msg": "injected fault"}, extra
        return self._route(method, path, query, body)

    def _route(self, method: str, path: str, query: dict, body: Any) -> tuple[int, Any, dict]:
        routes = [
            ("POST", r"^/api/v0/bundles/$", self._search),
            ("PUT", r"^/api/v0/asks/(\d+)/$", self._create),
            ("GET", r"^/api/v0/instances/(\d+)/$", self._show),
            ("GET", r"^/api/v1/instances/$", self._list),
            ("DELETE", r"^/api/v0/instances/(\d+)/$", self._destroy),
            ("PUT", r"^/api/v0/instances/request_logs/(\d+)/$", self._request_logs),
        ]
        for route_method, pattern, function in routes:
            match = re.match(pattern, path)
            if match and method == route_method:
                return function(*[int(group) for group in match.groups()], query=query, body=body)
        return 404, {"success": False, "error": "not_found", "msg": f"no fake endpoint {method} {path}"}, {}

    def _search(self, *, query: dict, body: dict) -> tuple[int, Any, dict]:
        with self._lock:
            rows = [dict(row) for row in self.offers.values()]
        for field, condition in body.items():
            if field in _QUERY_CONTROL_KEYS:
                continue
            for op, wanted in condition.items():
                rows = [row for row in rows if field in row and _OPS[op](row[field], wanted)]
        for field, direction in reversed(body.get("order") or []):
            rows.sort(key=lambda row: row.get(field, 0), reverse=direction == "desc")
        if body.get("limit"):
            rows = rows[: body["limit"]]
        return 200, {"offers": rows}, {}

    def _create(self, offer_id: int, *, query: dict, body: dict) -> tuple[int, Any, dict]:
        with self._lock:
            ask = self.offers.get(offer_id)
            if ask is None or ask["rented"]:
                return 404, {"success": False, "error": "no_such_ask", "msg": f"offer {offer_id} is not available"}, {}
            bid = body.get("price")
            if bid is not None and bid < ask["min_bid"]:
                return (
                    400,
                    {"success": False, "error": "bid_too_low", "msg": f"bid {bid} < min_bid {ask['min_bid']}"},
                    {},
                )
            ask["rented"] = True
            instance_id = next(self._ids)
            price = ask["dph_total"] if bid is None else bid
            self._billed[instance_id] = [price, time.time(), None]
            self._container_keys[instance_id] = secrets.token_hex(16)
            self.offers_of[instance_id] = offer_id
            self.instances[instance_id] = {
                "id": instance_id,
                "machine_id": ask["machine_id"],
                "host_id": ask["host_id"],
                "label": body.get("label"),
                "image_uuid": body.get("image"),
                "onstart": body.get("onstart"),
                "image_runtype": body.get("runtype"),
                "extra_env": [[k, v] for k, v in (body.get("env") or {}).items()],
                "disk_space": body.get("disk"),
                "start_date": time.time(),
                "dph_total": price,
                "is_bid": bid is not None,
                "num_gpus": ask["num_gpus"],
                "gpu_name": ask["gpu_name"],
                "cur_state": "running",
                "intended_status": "running",
                "ssh_host": LOOPBACK,
                "ssh_port": 20000 + instance_id % 10000,
                "public_ipaddr": LOOPBACK,
            }
            row = dict(self.instances[instance_id])
        for host in self.hosts:
            host.created(row)
        return 200, {"success": True, "new_contract": instance_id}, {}

    def _show(self, instance_id: int, *, query: dict, body: Any) -> tuple[int, Any, dict]:
        with self._lock:
            instance = self.instances.get(instance_id)
            return 200, {"instances": self._row(instance) if instance else None}, {}

    def _list(self, *, query: dict, body: Any) -> tuple[int, Any, dict]:
        limit = int(query.get("limit", 25))
        start = int(query.get("after_token", 0))
        with self._lock:
            rows = [self._row(self.instances[i]) for i in sorted(self.instances)]
        page = rows[start : start + limit]
        token = str(start + limit) if start + limit < len(rows) else None
        return 200, {"instances": page, "next_token": token, "total_instances": len(rows)}, {}

    def _destroy(self, instance_id: int, *, query: dict, body: Any) -> tuple[int, Any, dict]:
        with self._lock:
            if self.instances.pop(instance_id, None) is None:
                return 404, {"success": False, "error": "no_such_instance", "msg": f"no instance {instance_id}"}, {}
            self._billed[instance_id][2] = time.time()
            if instance_id in self.offers_of:
                self.offers[self.offers_of.pop(instance_id)]["rented"] = False
        for host in self.hosts:
            host.destroyed(instance_id)
        return 200, {"success": True}, {}

    def _request_logs(self, instance_id: int, *, query: dict, body: dict) -> tuple[int, Any, dict]:
        with self._lock:
            if instance_id not in self.instances:
                return 404, {"success": False, "error": "no_such_instance", "msg": f"no instance {instance_id}"}, {}
            token = f"{instance_id}-{len(self._log_urls)}"
            tail = body.get("tail")
            self._log_urls[token] = (instance_id, int(tail) if tail else None)
        return 200, {"success": True, "result_url": f"{self.url}/fake-logs/{token}"}, {}

    def _serve_log(self, token: str) -> tuple[int, Any, dict]:
        with self._lock:
            if token not in self._log_urls:
                return 404, "no such log", {}
            instance_id, tail = self._log_urls[token]
            path = self.log_files.get(instance_id)
            text = (
                path.read_text(errors="replace")
                if path is not None and path.exists()
                else self._logs.get(instance_id, "")
            )
            lines = text.splitlines(keepends=True)
        return 200, "".join(lines[-tail:] if tail else lines), {}


class _Handler(http.server.BaseHTTPRequestHandler):
    fake: FakeVastApi

    def _dispatch(self) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        query = {}
        for key, value in urllib.parse.parse_qsl(parsed.query):
            try:
                query[key] = json.loads(value)
            except ValueError:
                query[key] = value
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else {}
        headers = {key.lower(): value for key, value in self.headers.items()}
        status, payload, extra = self.fake.handle(self.command, parsed.path, query, headers, body)
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if isinstance(payload, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left: that is the point of a delay fault

    do_GET = do_PUT = do_POST = do_DELETE = _dispatch

    def log_message(self, format: str, *args) -> None:
        """Silent: the requests are in `fake.requests`."""
