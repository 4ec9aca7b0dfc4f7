"""Slow: the local Ray cluster the harness starts lets no client in without its token.

Ray's servers listen on every interface; with token authentication (training/cluster.py) every
gRPC port of the cluster (GCS, raylet, object manager, driver, workers) answers UNAUTHENTICATED
to a call without the token, and its HTTP agents answer 401. A second process without the token
cannot attach; with it, it can.
"""

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

import grpc
import pytest
import ray

from rl.harness import env_vars
from rl.harness.run import redaction
from rl.harness.training import lifecycle

pytestmark = pytest.mark.slow

# One method of each service Ray serves: a port answers UNIMPLEMENTED for the others.
_METHODS = (
    "/ray.rpc.NodeInfoGcsService/GetClusterId",
    "/ray.rpc.NodeManagerService/GetNodeStats",
    "/ray.rpc.ObjectManagerService/FreeObjects",
    "/ray.rpc.CoreWorkerService/NumPendingTasks",
)
_ATTACH = (
    "import ray; ray.init(address={address!r}, logging_level='ERROR');"
    " print('ATTACHED', ray.get(ray.remote(lambda: 6 * 7).remote()))"
)


@pytest.fixture(scope="module")
def local_cluster():
    lifecycle.init_ray(None, 1)
    try:
        assert ray.get(ray.remote(lambda: os.environ.get(env_vars.RAY_AUTH_MODE_ENV)).remote()) == "token"
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(name))
    found, stack = set(), [root]
    while stack:
        pid = stack.pop()
        found.add(pid)
        stack += children.get(pid, [])
    return found


def _listening_ports_of_this_cluster() -> dict[str, str]:
    """{host:port: process name} of every TCP port this process and its descendants (Ray's) listen on."""
    ours = _descendants(os.getpid())
    ports = {}
    for line in subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines():
        if any(int(pid) in ours for pid in re.findall(r"pid=(\d+)", line)):
            host, _, port = line.split()[3].rpartition(":")
            ports[f"{'127.0.0.1' if host in ('*', '0.0.0.0', '[::]') else host}:{port}"] = re.search(
                r'"([^"]+)"', line
            )[1]
    return ports


def _grpc_answers(address: str, token) -> set:
    """The status codes of one call of each Ray service at `address`, without UNIMPLEMENTED (another service)."""
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    answers = set()
    with grpc.insecure_channel(address) as channel:
        for method in _METHODS:
            try:
                channel.unary_unary(method)(b"", timeout=10, metadata=metadata)
                answers.add(grpc.StatusCode.OK)
            except grpc.RpcError as error:
                answers.add(error.code())
    return answers - {grpc.StatusCode.UNIMPLEMENTED}


def _http_status(address: str) -> object:
    try:
        with urllib.request.urlopen(f"http://{address}/", timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except Exception as error:  # noqa: BLE001 - not an HTTP server: a gRPC one, checked above
        return type(error).__name__


def test_every_port_of_the_local_cluster_refuses_a_client_without_the_token(local_cluster):
    token = os.environ[env_vars.RAY_AUTH_TOKEN_ENV]
    ports = _listening_ports_of_this_cluster()
    assert {"gcs_server", "raylet"} <= set(ports.values()), ports
    checked = []
    for address, process in ports.items():
        without = _grpc_answers(address, None)
        if without == {grpc.StatusCode.UNAVAILABLE}:  # not gRPC: Ray's HTTP agents
            assert _http_status(address) == 401, (address, process)
        else:
            assert without == {grpc.StatusCode.UNAUTHENTICATED}, (address, process, without)
            assert _grpc_answers(address, token) == {grpc.StatusCode.OK}, (address, process)
        checked.append(process)
    assert len(checked) >= 4, ports  # GCS, raylet's two servers, the driver (and its workers, agents)


def test_a_second_process_attaches_only_with_the_token(local_cluster, tmp_path):
    token = os.environ[env_vars.RAY_AUTH_TOKEN_ENV]
    assert redaction.redact(f"token {token}") == f"token {redaction.MASK}"
    stranger = {key: value for key, value in os.environ.items() if not key.startswith("RAY_AUTH")}
    stranger["HOME"] = str(tmp_path)  # nor a token file in ~/.ray
    attach = [sys.executable, "-c", _ATTACH.format(address=local_cluster)]
    refused = subprocess.run(attach, env=stranger, capture_output=True, text=True, timeout=180, check=False)
    assert refused.returncode != 0 and "ATTACHED" not in refused.stdout
    assert "Authentication token is missing or incorrect" in refused.stderr, refused.stderr[-2000:]
    holder = {**stranger, env_vars.RAY_AUTH_MODE_ENV: "token", env_vars.RAY_AUTH_TOKEN_ENV: token}
    allowed = subprocess.run(attach, env=holder, capture_output=True, text=True, timeout=180, check=False)
    assert "ATTACHED 42" in allowed.stdout, allowed.stderr[-2000:]
