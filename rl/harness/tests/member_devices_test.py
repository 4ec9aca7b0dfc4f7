"""Which GPU a study member sees: the shares trials ask for, and the environment a member's run gets (no GPU
needed: the slow test declares two GPUs to a local Ray, which hands out their ids as on a GPU machine)."""

import os
import subprocess
import sys

import pytest

from rl.harness.training import member_devices


@pytest.mark.parametrize(
    "gpu_count, members_at_once, share",
    [
        (0, 4, 0.0),  # no GPU: members ask for none
        (2, 2, 1.0),  # a GPU each
        (4, 2, 1.0),  # more GPUs than members: still one each, never more
        (1, 4, 0.25),  # four members on one GPU
        (2, 3, 0.5),  # two per GPU (one GPU has one spare slot)
        (3, 16, 1 / 6),  # ceil(16 / 3) = 6 per GPU
    ],
)
def test_members_share_the_gpus_equally(gpu_count, members_at_once, share):
    assert member_devices.gpu_share(gpu_count=gpu_count, members_at_once=members_at_once) == pytest.approx(share)
    slots_per_gpu = round(1 / share) if share else 0
    assert slots_per_gpu * gpu_count >= members_at_once or gpu_count == 0  # every member fits at once


def test_a_trial_asks_for_a_gpu_only_when_it_gets_one():
    assert member_devices.trial_resources(cpus=1, gpus=0.0) == {"cpu": 1}
    assert member_devices.trial_resources(cpus=2, gpus=0.25) == {"cpu": 2, "gpu": 0.25}
    with pytest.raises(ValueError, match="cpus=0"):
        member_devices.trial_resources(cpus=0, gpus=1)


def test_a_member_sees_its_own_gpus_and_none_without_one():
    assert member_devices.visible_devices([1]) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert member_devices.visible_devices(["0", "3"]) == {"CUDA_VISIBLE_DEVICES": "0,3"}
    # An empty value hides every GPU (unset would show them all): CUDA's documented meaning.
    assert member_devices.visible_devices([]) == {"CUDA_VISIBLE_DEVICES": ""}


@pytest.mark.slow
def test_members_placed_by_ray_see_only_the_device_they_were_given(monkeypatch):
    import ray

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ray.init(num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:

        @ray.remote
        def member() -> tuple:
            """What a trial does: the ids Ray gave it, Ray's own variable in the worker, and what its child sees."""
            env = {**os.environ, **member_devices.visible_devices(ray.get_gpu_ids())}
            seen = subprocess.run(
                [sys.executable, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            return [str(gpu) for gpu in ray.get_gpu_ids()], os.environ.get("CUDA_VISIBLE_DEVICES"), seen

        share = member_devices.gpu_share(gpu_count=2, members_at_once=4)
        packed = ray.get([member.options(num_cpus=1, num_gpus=share).remote() for _ in range(4)])
        without = ray.get(member.options(num_cpus=1, num_gpus=0).remote())
    finally:
        ray.shutdown()
    assert share == 0.5
    for ids, _, seen in packed:
        assert len(ids) == 1 and seen == ids[0]  # one device each, the one it was given
    assert sorted(seen for _, _, seen in packed) == ["0", "0", "1", "1"]  # two members per GPU
    ids, ray_variable, seen = without
    assert ids == [] and ray_variable is None  # Ray leaves a no-GPU task's variable unset ...
    assert seen == ""  # ... so the member is shown no GPU explicitly


def test_a_study_on_a_cluster_shares_its_gpus_among_the_members_running_at_once():
    share = member_devices.cluster_gpu_share
    assert share({"CPU": 16.0, "GPU": 1.0}, members=10, cpus_per_member=1, max_concurrent=None) == pytest.approx(0.1)
    assert share({"CPU": 16.0, "GPU": 1.0}, members=10, cpus_per_member=4, max_concurrent=None) == 0.25  # 4 at once
    assert share({"CPU": 16.0, "GPU": 2.0}, members=10, cpus_per_member=1, max_concurrent=2) == 1.0
    assert share({"CPU": 2.0}, members=10, cpus_per_member=1, max_concurrent=None) == 0.0  # no GPU
