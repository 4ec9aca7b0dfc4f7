import os

import pytest

from rl.harness import env_vars
from rl.harness.tests import contexts
from rl.harness.training import hardware


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota_is_the_tightest_along_the_ancestors(tmp_path):
    _write(tmp_path / "proc_cgroup", "0::/outer/inner\n")
    _write(tmp_path / "fs/outer/inner/cpu.max", "max 100000\n")
    _write(tmp_path / "fs/outer/cpu.max", "150000 100000\n")
    _write(tmp_path / "fs/cpu.max", "400000 100000\n")
    cpus, source = hardware.cgroup_cpu_limit(str(tmp_path / "fs"), str(tmp_path / "proc_cgroup"))
    assert cpus == 1.5 and source.endswith("outer/cpu.max")


def test_cgroup_v1_quota(tmp_path):
    _write(tmp_path / "proc_cgroup", "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n")
    _write(tmp_path / "fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "200000\n")
    _write(tmp_path / "fs/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
    assert hardware.cgroup_cpu_limit(str(tmp_path / "fs"), str(tmp_path / "proc_cgroup"))[0] == 2.0


def test_no_quota(tmp_path):
    _write(tmp_path / "proc_cgroup", "1:cpu:/\n0::/\n")
    _write(tmp_path / "fs/cpu/cpu.cfs_quota_us", "-1\n")
    _write(tmp_path / "fs/cpu/cpu.cfs_period_us", "100000\n")
    _write(tmp_path / "fs/cpu.max", "max 100000\n")
    assert hardware.cgroup_cpu_limit(str(tmp_path / "fs"), str(tmp_path / "proc_cgroup")) is None


def test_a_fractional_quota_rounds_down_and_caps_the_affinity_count(tmp_path):
    _write(tmp_path / "proc_cgroup", "0::/\n")
    _write(tmp_path / "fs/cpu.max", "150000 100000\n")
    count, source = hardware.usable_cpu_count(str(tmp_path / "fs"), str(tmp_path / "proc_cgroup"))
    assert count == 1 and (len(os.sched_getaffinity(0)) == 1 or "cgroup quota 1.5" in source)


def _facts(cpus=8, cuda=False, mps=False):
    return contexts.machine_facts(cpus, cuda=cuda, mps=mps)


def test_auto_picks_cuda_then_mps_then_cpu():
    assert hardware.choose_profile("auto", _facts(cuda=True)).name == "cuda"
    assert hardware.choose_profile("auto", _facts(mps=True)).name == "mps"
    profile = hardware.choose_profile("auto", _facts(cpus=8))
    assert (profile.name, profile.requested, profile.learner_device) == ("cpu", "auto", "cpu")


def test_profiles_use_the_machine():
    cpu = hardware.choose_profile("cpu", _facts(cpus=8))
    assert (cpu.max_env_runners, cpu.torch_threads, cpu.num_cpus) == (7, 1, 8)
    assert hardware.choose_profile("cpu", _facts(cpus=1)).max_env_runners == 0
    cuda = hardware.choose_profile("cuda", _facts(cpus=16, cuda=True))
    assert (cuda.learner_device, cuda.num_gpus_per_learner, cuda.max_env_runners) == ("cuda", 1, 15)
    mps = hardware.choose_profile("mps", _facts(mps=True))
    assert (mps.learner_device, mps.torch_device, mps.num_gpus_per_learner) == ("cpu", "mps", 0)


@pytest.mark.parametrize("requested", ["cuda", "mps", "tpu"])
def test_impossible_profiles_name_the_fix(requested):
    with pytest.raises(hardware.HardwareError, match="auto"):
        hardware.choose_profile(requested, _facts())


def test_detected_machine_is_consistent():
    facts = hardware.detect_machine()
    assert 1 <= facts.cpu_count <= (facts.cpu_count_os or facts.cpu_count)
    assert facts.gpu_count == 0 or facts.cuda_available


def test_profile_configures_rllib():
    from ray.rllib.algorithms.ppo import PPOConfig

    profile = hardware.choose_profile("cpu", _facts(cpus=3))
    config = hardware.apply_to(profile, PPOConfig(), hardware.place_envs(profile, 8))
    assert (config.num_env_runners, config.num_envs_per_env_runner, config.num_gpus_per_learner) == (2, 4, 0)


@pytest.mark.parametrize("cpus", [1, 2])
def test_small_machines_sample_every_env_in_the_local_runner(cpus):
    plan = hardware.place_envs(hardware.choose_profile("cpu", _facts(cpus=cpus)), 32)
    assert (plan.num_env_runners, plan.num_envs_per_env_runner, plan.placement) == (0, 32, "local")
    assert "docs/performance.md" in plan.reason


@pytest.mark.parametrize(
    ("cpus", "parallel_envs", "runners", "envs_each"),
    [(8, 32, 4, 8), (8, 7, 7, 1), (16, 30, 15, 2), (4, 5, 1, 5), (8, 3, 3, 1)],
)
def test_larger_machines_split_envs_evenly_over_remote_runners(cpus, parallel_envs, runners, envs_each):
    plan = hardware.place_envs(hardware.choose_profile("cpu", _facts(cpus=cpus)), parallel_envs)
    assert (plan.num_env_runners, plan.num_envs_per_env_runner, plan.placement) == (runners, envs_each, "remote")
    assert plan.num_env_runners * plan.num_envs_per_env_runner == parallel_envs


@pytest.mark.parametrize(("cpus", "runners", "envs_each"), [(1, 1, 32), (2, 1, 32), (8, 4, 8)])
def test_a_pipelined_config_samples_in_remote_runners_and_records_it(cpus, runners, envs_each):
    profile = hardware.choose_profile("cpu", _facts(cpus=cpus))
    plan = hardware.place_envs(profile, 32, pipelined=True)
    assert (plan.num_env_runners, plan.num_envs_per_env_runner, plan.placement) == (runners, envs_each, "remote")
    assert plan.as_dict()["pipelined"] is True and "pipelined" in plan.reason
    promise = hardware.determinism(profile, plan, "direct")  # one request per runner in flight: a fixed order
    assert promise["expected"] is True and "policy lag 1" in promise["why"] and "scope" in promise
    assert hardware.determinism(profile, hardware.place_envs(profile, 32), "direct")["why"] != promise["why"]
    assert hardware.place_envs(profile, 32).as_dict()["pipelined"] is False


def test_on_a_cluster_the_cluster_cpus_place_the_runners_and_the_learner_stays_local():
    local = hardware.choose_profile("cpu", _facts(cpus=2))
    on_cluster = hardware.on_cluster(local, 9)
    assert (on_cluster.num_cpus, on_cluster.max_env_runners) == (9, 8)
    assert (on_cluster.learner_device, on_cluster.torch_threads, on_cluster.name) == ("cpu", 1, "cpu")
    assert hardware.place_envs(local, 16).placement == "local"
    assert hardware.place_envs(on_cluster, 16).num_env_runners == 8
    no_cpu = hardware.on_cluster(local, 0)
    assert hardware.place_envs(no_cpu, 16).placement == "local"  # no CPU anywhere: the driver samples


def test_process_settings_set_torch_threads_and_skip_the_fill_of_new_tensors(monkeypatch):
    import torch

    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setattr(torch.utils.deterministic, "fill_uninitialized_memory", True)
    hardware.apply_process_settings(hardware.choose_profile("cpu", _facts()))
    assert os.environ["OMP_NUM_THREADS"] == "1"
    assert torch.get_num_threads() == 1
    assert torch.utils.deterministic.fill_uninitialized_memory is False


def test_nvidia_driver_version_is_read_from_the_kernel_module(tmp_path):
    version_file = tmp_path / "version"
    version_file.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    assert hardware.nvidia_driver_version(str(version_file)) == "580.65.06"
    version_file.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    )
    assert hardware.nvidia_driver_version(str(version_file)) == "535.104.05"
    assert hardware.nvidia_driver_version(str(tmp_path / "absent")) is None


def test_cuda_profile_without_a_gpu_names_the_driver_and_the_cuda_build():
    with pytest.raises(hardware.HardwareError, match=r"NVIDIA driver: none found.*--config=cuda"):
        hardware.choose_profile("cuda", _facts())


def test_torch_determinism_settings_are_recorded():
    import torch

    determinism = hardware.torch_determinism(torch)
    assert determinism["deterministic_algorithms"] is torch.are_deterministic_algorithms_enabled()
    assert set(determinism) == {
        "deterministic_algorithms",
        "cudnn_deterministic",
        "cudnn_benchmark",
        "cublas_workspace_config",
    }


def test_a_cpu_share_caps_the_cpus_a_run_sizes_itself_by(monkeypatch):
    monkeypatch.setenv(env_vars.CPU_SHARE_ENV, "1")
    facts = hardware.detect_machine()
    assert facts.cpu_count == 1 and env_vars.CPU_SHARE_ENV in facts.cpu_limit
    assert hardware.choose_profile("cpu", facts).num_cpus == 1
    monkeypatch.setenv(env_vars.CPU_SHARE_ENV, "none")
    with pytest.raises(hardware.HardwareError, match="positive whole number of CPUs; unset it or fix it"):
        hardware.detect_machine()
