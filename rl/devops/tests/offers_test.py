"""Hard gates and the score: each gate rejects alone, scores match hand-computed values."""

import pytest

from rl.devops.vast import offers, redact
from rl.devops.vast.testing import fake_api

GATES = offers.Gates(
    num_gpus=1,
    min_reliability=0.98,
    min_cuda=12.1,
    disk_gb=40,
    min_cpu_cores=8,
    max_dph=0.8,
    excluded_machines=frozenset({999}),
)


def test_a_good_offer_passes_every_gate():
    assert GATES.failures(fake_api.offer(1), {}) == []


@pytest.mark.parametrize(
    "fields, gate",
    [
        ({"reliability": 0.97}, "min_reliability"),
        ({"verified": False}, "verified"),
        ({"cuda_max_good": 11.8}, "min_cuda"),
        ({"driver_version": "470.57.02"}, "driver"),
        ({"driver_version": None}, "driver"),
        ({"disk_space": 39.9}, "disk_gb"),
        ({"cpu_cores_effective": 4.0}, "min_cpu_cores"),
        ({"dph_total": 0.81}, "max_dph"),
        ({"dph_total": 0.0}, "max_dph"),
        ({"machine_id": 999}, "excluded"),
        ({"num_gpus": 2}, "num_gpus"),
        ({"rented": True}, "rentable"),
        ({"dlperf": None}, "scorable"),
        ({"machine_id": None}, "machine_id"),
    ],
)
def test_each_gate_rejects_on_its_own(fields, gate):
    assert [g for g, _ in GATES.failures(fake_api.offer(1, **fields), {})] == [gate]


def test_default_gates_require_a_driver_for_the_locked_cuda_torch():
    # CUDA 13.x needs driver branch >= 580 (NVIDIA's minor-version compatibility table).
    defaults = offers.Gates()
    assert defaults.failures(fake_api.offer(1), {}) == []
    assert [g for g, _ in defaults.failures(fake_api.offer(1, driver_version="575.57.08"), {})] == ["driver"]
    assert [g for g, _ in defaults.failures(fake_api.offer(1, cuda_max_good=12.8), {})] == ["min_cuda"]
    assert offers.min_driver_for(12.1) == 525
    with pytest.raises(redact.DevopsError, match="MIN_DRIVER_FOR_CUDA_MAJOR"):
        offers.min_driver_for(10.2)


def test_locked_torch_cuda_is_the_cuda_lock_s():
    import os
    import pathlib
    import re

    lock = pathlib.Path(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"], "requirements_lock_cuda.txt")
    assert float(re.search(r"^# torch-cuda: (\S+)$", lock.read_text(), re.MULTILINE)[1]) == offers.LOCKED_TORCH_CUDA


def test_a_missing_field_fails_its_gate_instead_of_being_assumed_good():
    offer = fake_api.offer(1)
    del offer["reliability"], offer["cuda_max_good"]
    assert {g for g, _ in GATES.failures(offer, {})} == {"min_reliability", "min_cuda"}


def test_quarantined_machines_fail_with_the_reason():
    ((gate, why),) = GATES.failures(fake_api.offer(1, machine_id=7), {7: "never booted"})
    assert gate == "quarantined" and "never booted" in why


def test_gpu_names_gate_only_when_given():
    gates = offers.Gates(gpu_names=("RTX 3090",))
    assert [g for g, _ in gates.failures(fake_api.offer(1), {})] == ["gpu_name"]


def test_score_is_reliability_times_dlperf_per_dollar():
    # Hand-computed: 0.99 * 80 / 0.40 = 198.0 and 0.90 * 50 / 0.25 = 180.0.
    assert offers.score({"reliability": 0.99, "dlperf": 80.0}, 0.40) == pytest.approx(198.0)
    assert offers.score({"reliability": 0.90, "dlperf": 50.0}, 0.25) == pytest.approx(180.0)


def test_rank_orders_by_score_then_price_then_id_and_counts_rejections():
    candidates = [
        fake_api.offer(1, reliability=0.99, dlperf=50.0, dph_total=0.50),  # 99.0
        fake_api.offer(2, reliability=0.99, dlperf=80.0, dph_total=0.40),  # 198.0
        fake_api.offer(3, reliability=0.99, dlperf=40.0, dph_total=0.40),  # 99.0, cheaper than 1
        fake_api.offer(4, reliability=0.99, dlperf=40.0, dph_total=0.40),  # 99.0, same as 3: id decides
        fake_api.offer(5, reliability=0.50),
        fake_api.offer(6, dph_total=5.0, reliability=0.5),
    ]
    choice = offers.rank(candidates, GATES, {})
    assert [s.offer["id"] for s in choice.ranked] == [2, 3, 4, 1]
    assert choice.rejected == {"min_reliability": 2, "max_dph": 1}
    assert choice.summary() == "6 offers, 4 pass the gates; rejected: 2 min_reliability, 1 max_dph"


def test_bad_gates_name_the_problem():
    with pytest.raises(redact.DevopsError, match="min_reliability=1.5 must be within"):
        offers.Gates(min_reliability=1.5)
    with pytest.raises(redact.DevopsError, match="max_dph=0 must be > 0"):
        offers.Gates(max_dph=0)


def test_server_query_carries_the_gates_and_the_quarantine():
    query = GATES.query({7: "never booted"})
    assert query["reliability"] == {"gte": 0.98} and query["dph_total"] == {"lte": 0.8}
    assert query["verified"] == {"eq": True} and query["machine_id"] == {"notin": [7, 999]}
    assert "verified" not in offers.Gates(require_verified=False).query({})


def test_search_against_the_fake_sends_the_filter_and_ranks(account, fake):
    fake.offers[9] = fake_api.offer(9, dph_total=2.0)  # over the price cap: the server filters it
    fake.offers[10] = fake_api.offer(10, machine_id=7)  # quarantined machine
    choice = offers.search(account, GATES, {7: "never booted"})
    assert [s.offer["id"] for s in choice.ranked] == [1, 2, 3, 4]
    (request,) = fake.calls("POST", r"/bundles/$")
    assert request.body["allocated_storage"] == 40 and request.body["type"] == "on-demand"
    assert request.body["machine_id"] == {"notin": [7, 999]}
    assert request.body["order"] == [["dlperf_per_dphtotal", "desc"]]
