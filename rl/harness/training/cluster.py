"""Ray clusters: checking `--ray-address` before a run, describing the cluster for the manifest, token auth.

    cluster.require_token_authentication()     # before starting a local Ray: only clients with its token get in
    cluster.check_address("10.0.0.5:6379")    # ClusterError (one line naming the fix), within the timeout
    facts = cluster.describe("10.0.0.5:6379")  # after ray.init: address, nodes, resources, versions per node
    cluster.check_versions(facts)               # ClusterError when a node runs another Ray or Python

`check_address` needs no Ray in this process: it probes the address in a subprocess
(`python -m rl.harness.training.cluster ADDRESS`), because `ray.init` against an address where no Ray
cluster answers blocks in Ray's C++ client (holding the GIL, so signal handlers cannot run) for
60 s and then ends the whole process. The subprocess is killed at the deadline instead.
Ray is imported only inside `describe` and the probe.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import secrets
import socket
import subprocess
import sys

from rl.harness import env_vars
from rl.harness.errors import UsageError
from rl.harness.run import redaction

_TCP_TIMEOUT_S = 3.0
_VERSIONS_TIMEOUT_S = 10.0  # for all nodes together, inside the probe's deadline
RAY_CLIENT_SCHEME = "ray://"
_HOW_TO_START = (
    "start a cluster with `ray start --head --port=6379` on the head (docs/cluster.md) and pass"
    " <head>:6379, or drop --ray-address to run on a local Ray"
)


class ClusterError(UsageError):
    """The cluster cannot run this driver: one line naming the problem and the fix (exit 2)."""


def require_token_authentication() -> None:
    """The local Ray cluster this process starts next accepts only clients that hold its token.

    Ray listens on every interface, and without authentication anyone who reaches a port can
    run code as this user. Ray's token mode (`RAY_AUTH_MODE=token`) makes every server of the
    cluster refuse a client without the token. The token is $RAY_AUTH_TOKEN when set, else a new
    random one for this process; it is set in this process's environment, which Ray's processes
    and workers inherit, and registered for redaction. When $RAY_AUTH_MODE is already `token`,
    the user's setup (their token, a token file) is left as it is.
    """
    mode, token = env_vars.ray_auth()
    if token:
        redaction.register_secret(token)
    if mode == "token":
        return
    token = token or secrets.token_hex(32)
    redaction.register_secret(token)
    os.environ[env_vars.RAY_AUTH_TOKEN_ENV] = token
    os.environ[env_vars.RAY_AUTH_MODE_ENV] = "token"
    _reload_ray_auth_settings()


def _reload_ray_auth_settings() -> None:
    """Makes Ray read the authentication variables again (it read them once, when imported).

    Private Ray API (Ray's own tests do the same); tests/cluster_auth_test.py fails once Ray changes it.
    """
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def driver_versions() -> dict:
    """The Ray and Python versions of this process (from package metadata: no Ray import)."""
    return {"ray": importlib.metadata.version("ray"), "python": platform.python_version()}


def host_and_port(address: str) -> tuple[str, int] | None:
    """(host, port) of `host:port` or `ray://host:port`; None for `auto` (Ray finds the local cluster).

    Raises ClusterError for anything else.
    """
    if address == "auto":
        return None
    rest = address.removeprefix(RAY_CLIENT_SCHEME)
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterError(
            f"--ray-address {address!r} is not an address; pass <head>:<port> (the GCS address"
            " `ray start --head` prints), ray://<head>:10001 (Ray Client) or auto"
        )
    return host.strip("[]"), int(port)


def _tcp_problem(host: str, port: int) -> str | None:
    try:
        with socket.create_connection((host, port), timeout=_TCP_TIMEOUT_S):
            return None
    except TimeoutError:
        return f"no answer within {_TCP_TIMEOUT_S:g} s"
    except OSError as error:
        return error.strerror or str(error)


def check_address(address: str, timeout_s: float | None = None) -> dict:
    """Connects to `address` once in a subprocess; returns the cluster's facts (`describe`).

    Raises ClusterError naming the fix when nothing listens there, no Ray cluster answers within
    `timeout_s` (default $RL_HARNESS_RAY_CONNECT_TIMEOUT_S or 25 s), the connection fails, or a
    node runs another Ray or Python than this driver.
    """
    timeout_s = env_vars.ray_connect_timeout_seconds() if timeout_s is None else timeout_s
    endpoint = host_and_port(address)
    if endpoint is not None and (problem := _tcp_problem(*endpoint)):
        raise ClusterError(
            f"--ray-address {address}: nothing listens on {endpoint[0]}:{endpoint[1]} ({problem}); {_HOW_TO_START}"
        )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        probe = subprocess.run(
            [sys.executable, "-m", __name__, address],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ClusterError(
            f"--ray-address {address}: no Ray cluster answered within {timeout_s:g} s (is it the"
            f" head's GCS port, and is the cluster up?); {_HOW_TO_START}"
        ) from None
    answer = _last_json_line(probe.stdout)
    if answer is None or "error" in answer:
        detail = answer["error"] if answer else (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        raise ClusterError(f"--ray-address {address}: connecting failed: {detail}; {_HOW_TO_START}")
    check_versions(answer["cluster"])
    return answer["cluster"]


def _last_json_line(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def check_versions(facts: dict, driver: dict | None = None) -> None:
    """ClusterError when a node's Ray or Python differs from the driver's (pickled code would not load).

    A node that did not say (`versions_error`: busy, or gone meanwhile) is not refused for it.
    """
    driver = driver or driver_versions()
    for node in facts["nodes"]:
        if "versions_error" not in node and (node.get("ray"), node.get("python")) != (driver["ray"], driver["python"]):
            raise ClusterError(
                f"--ray-address {facts['address']}: node {node['name']} ({node['node_id'][:8]}) runs Ray"
                f" {node.get('ray')} / Python {node.get('python')}, this driver Ray {driver['ray']} / Python"
                f" {driver['python']}; run the driver and every node from the same lock (docs/cluster.md)"
            )


def describe(address: str | None, *, per_node_versions: bool = True) -> dict:
    """The connected cluster for the manifest: address, nodes, resources and versions per node.

    `per_node_versions` asks every node for its versions with a tiny task pinned to it; without
    it (a local Ray this process started) the nodes run this interpreter by construction.
    """
    import ray

    driver = driver_versions()
    nodes = [node for node in ray.nodes() if node["Alive"]]
    versions = _node_versions([node["NodeID"] for node in nodes]) if per_node_versions else {}
    return {
        "address": address,
        "node_count": len(nodes),
        "driver_node_id": ray.get_runtime_context().get_node_id(),
        "driver": driver,
        "nodes": [
            {
                "node_id": node["NodeID"],
                "name": node.get("NodeName") or node["NodeManagerAddress"],
                "ip": node["NodeManagerAddress"],
                "head": "node:__internal_head__" in node["Resources"],
                # node:<ip> and node:__internal_head__ are Ray's placement labels, not capacity.
                "resources": {
                    key: value for key, value in sorted(node["Resources"].items()) if not key.startswith("node:")
                },
                **versions.get(node["NodeID"], driver),
            }
            for node in nodes
        ],
    }


def _versions_here() -> dict:
    import ray

    return {"ray": ray.__version__, "python": platform.python_version()}


def _node_versions(node_ids: list[str]) -> dict[str, dict]:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0)(_versions_here)
    pending = {
        node_id: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
        for node_id in node_ids
    }
    answered, _ = ray.wait(list(pending.values()), num_returns=len(pending), timeout=_VERSIONS_TIMEOUT_S)
    versions = {}
    for node_id, reference in pending.items():
        try:
            versions[node_id] = (
                ray.get(reference)
                if reference in answered
                else _unknown_versions(f"no answer within {_VERSIONS_TIMEOUT_S:g} s")
            )
        except ray.exceptions.RayError as error:
            versions[node_id] = _unknown_versions(f"{type(error).__name__}: {error}")
    return versions


def _unknown_versions(why: str) -> dict:
    return {"ray": None, "python": None, "versions_error": why}


def _probe(address: str) -> dict:
    import ray

    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except Exception as error:  # noqa: BLE001 - Ray's own version check and connection errors: reported, one line
        return {"error": " ".join(f"{type(error).__name__}: {error}".split())}
    try:
        return {"cluster": describe(address)}
    finally:
        ray.shutdown()


if __name__ == "__main__":
    print(json.dumps(_probe(sys.argv[1])), flush=True)
