"""cluster.check_address and check_versions without a cluster: bad addresses, refused ports, versions."""

import socket
import time

import pytest

from rl.harness import env_vars
from rl.harness.training import cluster


def _closed_port():
    with socket.socket() as probe:  # bound, never listening: connections are refused
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("address", ["", "head", "head:", "head:port", "head:70000", "ray://:10001"])
def test_a_malformed_address_names_the_forms_accepted(address):
    with pytest.raises(cluster.ClusterError, match="is not an address; pass <head>:<port>"):
        cluster.check_address(address)


def test_an_address_where_nothing_listens_fails_at_once_naming_it_and_the_fix():
    address = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(cluster.ClusterError) as error:
        cluster.check_address(address)
    assert time.monotonic() - started < 5
    message = str(error.value)
    assert "\n" not in message and address in message and "nothing listens" in message
    assert "ray start --head" in message and "drop --ray-address" in message


def test_host_and_port_of_each_form():
    assert cluster.host_and_port("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert cluster.host_and_port("ray://head:10001") == ("head", 10001)
    assert cluster.host_and_port("[::1]:6379") == ("::1", 6379)
    assert cluster.host_and_port("auto") is None


def _facts(*versions):
    return {
        "address": "head:6379",
        "nodes": [
            {"node_id": f"{index:056x}", "name": f"node-{index}", "ray": ray, "python": python}
            for index, (ray, python) in enumerate(versions)
        ],
    }


def test_a_node_with_another_ray_or_python_is_one_clear_error():
    driver = {"ray": "2.56.0", "python": "3.11.7"}
    cluster.check_versions(_facts(("2.56.0", "3.11.7"), ("2.56.0", "3.11.7")), driver)
    for other in (("2.55.1", "3.11.7"), ("2.56.0", "3.12.1")):
        with pytest.raises(cluster.ClusterError) as error:
            cluster.check_versions(_facts(("2.56.0", "3.11.7"), other), driver)
        message = str(error.value)
        assert "\n" not in message and "node node-1" in message and f"Ray {other[0]} / Python {other[1]}" in message
        assert "this driver Ray 2.56.0 / Python 3.11.7" in message and "same lock" in message


def test_a_node_that_did_not_say_its_versions_is_not_refused_for_it():
    facts = _facts(("2.56.0", "3.11.7"), (None, None))
    facts["nodes"][1]["versions_error"] = "no answer within 10 s"
    cluster.check_versions(facts, {"ray": "2.56.0", "python": "3.11.7"})


def test_the_driver_versions_come_from_package_metadata():
    import platform

    versions = cluster.driver_versions()
    assert versions["python"] == platform.python_version() and versions["ray"].count(".") == 2


def test_the_timeout_knob_must_be_a_positive_number():
    assert env_vars.ray_connect_timeout_seconds({}) == env_vars.DEFAULT_RAY_CONNECT_TIMEOUT_S
    assert env_vars.ray_connect_timeout_seconds({env_vars.RAY_CONNECT_TIMEOUT_ENV: "4.5"}) == 4.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(env_vars.EnvVarError, match=env_vars.RAY_CONNECT_TIMEOUT_ENV):
            env_vars.ray_connect_timeout_seconds({env_vars.RAY_CONNECT_TIMEOUT_ENV: bad})
