"""Hardware profiles: learner device, env runners, envs per runner and torch threads for this machine.

    facts = hardware.detect_machine()              # cgroup-aware CPU count, GPU model, CUDA
    profile = hardware.choose_profile("auto", facts)  # a run.machine.HardwareProfile
    hardware.apply_to(profile, config, plan)       # an RLlib AlgorithmConfig (configs.prepare calls this)
    hardware.apply_process_settings(profile)       # torch threads for this process and its children
    hardware.skip_uninitialized_fill(torch)        # deterministic torch without its NaN fill of new tensors

Profiles (docs/harness.md explains the choices):

    cpu   learner on CPU; one env runner per CPU left after the driver/learner's one
    cpu-portable  as cpu, with the kernel dispatch of torch, MKL, oneDNN, OpenBLAS and numpy pinned
          to the x86-64-v2 baseline (PORTABLE_KERNEL_DISPATCH), so machines that differ in their
          vector instructions run the same kernels (docs/performance.md: what it costs)
    cuda  the same runners; the learner on one GPU
    mps   RLlib 2.56 cannot place a learner on MPS: as cpu, with torch_device "mps" for
          a recipe's own torch work
    auto  cuda if a CUDA device is visible, else mps if available, else cpu

Operational only: nothing here changes what is learned (the train batch size is the
recipe's; RLlib derives the rollout fragment from it).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import platform as python_platform
import re
import sys
from collections.abc import Mapping
from typing import Any

from rl.harness import env_vars
from rl.harness.errors import UsageError
from rl.harness.run import platform
from rl.harness.run.machine import HardwareProfile, MachineFacts

PROFILES = ("auto", "cpu", "cpu-portable", "cuda", "mps")
PORTABLE_PROFILE = "cpu-portable"
# --env-runner: the harness's EnvRunner (batched_env_runner.py: one batched loop, the same episodes) or RLlib's.
BATCHED_ENV_RUNNER, RLLIB_ENV_RUNNER = "batched", "rllib"
ENV_RUNNERS = (BATCHED_ENV_RUNNER, RLLIB_ENV_RUNNER)
# What the portable profile pins (the x86-64-v2 baseline every x86-64 machine of the last 15 years offers):
# ATen's scalar kernels, MKL's SSE2 code path that its vendor keeps the same on Intel and AMD
# ("conditional numerical reproducibility"), oneDNN up to SSE4.1, OpenBLAS's Nehalem kernels; numpy's
# dispatched targets are switched off by `portable_kernel_dispatch`.
PORTABLE_KERNEL_DISPATCH = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "OPENBLAS_CORETYPE": "Nehalem",
}
PORTABLE_TORCH_CAPABILITY = "DEFAULT"  # what torch reports once ATEN_CPU_CAPABILITY=default took effect
X86_64_MACHINES = ("x86_64", "AMD64")  # platform.machine() of the machines the portable profile's pins apply to
TORCH_THREADS = 1  # one thread per process: measured up to 5x faster on 2 cores (docs/harness.md)
# PPO samples and learns in turn, so a remote runner gains nothing without a spare CPU to
# sample on while the learner runs; on 2 cores the local runner is faster (0.30 against 0.34 s an
# iteration for 2 remote runners x 16 envs at 8d9c309: docs/performance.md, "Sampling").
LOCAL_SAMPLING_MAX_CPUS = 2
# The AlgorithmConfig attribute that, when True, asks for pipelined sampling: remote EnvRunners sample the
# next batch while the learner updates (rl.learners.pipelined.PipelinedPPOConfig sets it).
PIPELINED = "pipelined"


class HardwareError(UsageError, ValueError):
    """A requested profile does not fit this machine; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class SamplingPlan:
    """Where a recipe's `parallel_envs` step: `num_env_runners` (0: the driver's local runner) x envs each."""

    parallel_envs: int
    num_env_runners: int
    num_envs_per_env_runner: int
    placement: str  # "local" | "remote"
    reason: str
    pipelined: bool = False  # remote runners sample the next batch while the learner updates (PIPELINED)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def place_envs(profile: HardwareProfile, parallel_envs: int, *, pipelined: bool = False) -> SamplingPlan:
    """Places `parallel_envs` envs (a checked count: `configs.plan_sampling`): all in the local runner on small
    machines, else split over runners; a pipelined config's (`PIPELINED`) always in remote runners, all in
    one on small machines, so that sampling takes the core the learner leaves."""
    if pipelined:
        runners = 1 if profile.num_cpus <= LOCAL_SAMPLING_MAX_CPUS else _runners_for(profile, parallel_envs)
        return SamplingPlan(
            parallel_envs,
            runners,
            parallel_envs // runners,
            "remote",
            f"pipelined: {runners} remote runner(s) sample the next batch while the learner updates",
            pipelined=True,
        )
    if profile.num_cpus <= LOCAL_SAMPLING_MAX_CPUS or profile.max_env_runners < 1:
        return SamplingPlan(
            parallel_envs,
            0,
            parallel_envs,
            "local",
            f"{profile.num_cpus} CPU(s) <= {LOCAL_SAMPLING_MAX_CPUS}: sampling and learning in"
            " one process was faster than a remote runner (docs/performance.md)",
        )
    runners = _runners_for(profile, parallel_envs)
    return SamplingPlan(
        parallel_envs,
        runners,
        parallel_envs // runners,
        "remote",
        f"{profile.num_cpus} CPUs: {runners} remote runner(s) sample in parallel, one CPU each",
    )


def _runners_for(profile: HardwareProfile, parallel_envs: int) -> int:
    """The most remote runners (up to the profile's) that split `parallel_envs` evenly."""
    return max(
        count
        for count in range(1, min(max(profile.max_env_runners, 1), parallel_envs) + 1)
        if parallel_envs % count == 0
    )


def in_process_plan(parallel_envs: int) -> SamplingPlan:
    """Every one of `parallel_envs` envs in this process's EnvRunner (the in-process runner's only placement)."""
    return SamplingPlan(
        parallel_envs,
        0,
        parallel_envs,
        "local",
        "in-process runner: the learner and every env step in one process, without Ray",
    )


def on_cluster(profile: HardwareProfile, cpus: int) -> HardwareProfile:
    """`profile` placing env runners on a Ray cluster with `cpus` CPUs in all (the same rule as on one machine).

    The learner's device and torch threads stay this machine's: the learner runs in the driver.
    """
    return dataclasses.replace(profile, num_cpus=cpus, max_env_runners=max(cpus - 1, 0))


def apply_to(profile: HardwareProfile, config, plan: SamplingPlan):
    """Sets runners, envs per runner (from `plan`) and the learner's GPU on an RLlib AlgorithmConfig."""
    config.env_runners(
        num_env_runners=plan.num_env_runners,
        num_envs_per_env_runner=plan.num_envs_per_env_runner,
    )
    config.learners(num_gpus_per_learner=profile.num_gpus_per_learner)
    return config


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def _own_cgroups(proc_cgroup: str) -> dict[str, str]:
    """controller -> cgroup path of this process ("" is the v2 unified hierarchy)."""
    groups = {}
    for line in (_read(proc_cgroup) or "").splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path
    return groups


def _ancestors(root: str, path: str) -> list[str]:
    """`root/a/b`, `root/a`, `root`: a limit anywhere above us applies to us."""
    parts = [part for part in path.split("/") if part]
    return [os.path.join(root, *parts[:depth]) for depth in range(len(parts), -1, -1)]


def cgroup_cpu_limit(root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup"):
    """(CPUs allowed by the cgroup quota, file that says so), or None without a quota.

    cgroup v2 `cpu.max` ("150000 100000" = 1.5 CPUs, "max 100000" = none) is looked up
    along our cgroup's ancestors, then cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`.
    """
    groups = _own_cgroups(proc_cgroup)
    limits = []
    for folder in _ancestors(root, groups.get("", "")):
        quota, _, period = (_read(os.path.join(folder, "cpu.max")) or "max").partition(" ")
        if quota != "max":
            limits.append((int(quota) / int(period), os.path.join(folder, "cpu.max")))
    for mount in ("cpu", "cpu,cpuacct"):
        for folder in _ancestors(os.path.join(root, mount), groups.get("cpu", "")):
            quota = _read(os.path.join(folder, "cpu.cfs_quota_us"))
            period = _read(os.path.join(folder, "cpu.cfs_period_us"))
            if quota and period and int(quota) > 0:
                limits.append((int(quota) / int(period), os.path.join(folder, "cpu.cfs_quota_us")))
    return min(limits) if limits else None


def usable_cpu_count(root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup") -> tuple[int, str]:
    """CPUs this process may use: affinity mask, capped by a cgroup quota (rounded down, >= 1)."""
    if hasattr(os, "sched_getaffinity"):
        count, source = len(os.sched_getaffinity(0)), "sched_getaffinity"
    else:
        count, source = os.cpu_count() or 1, "os.cpu_count"
    limit = cgroup_cpu_limit(root, proc_cgroup)
    if limit and math.floor(limit[0]) < count:
        count, source = max(1, math.floor(limit[0])), f"cgroup quota {limit[0]:g} CPUs ({limit[1]})"
    return count, source


def _nvidia_device_visible() -> bool:
    """Cheap pre-check, so CPU machines never pay for importing torch here."""
    return os.path.exists("/proc/driver/nvidia/gpus") or os.path.exists("/dev/nvidia0")


_NVIDIA_DRIVER_VERSION = re.compile(r"Kernel Module\s+(?:for \S+\s+)?(\d+(?:\.\d+)+)")


def nvidia_driver_version(path: str = "/proc/driver/nvidia/version") -> str | None:
    """The NVIDIA kernel driver's version ("580.65.06"), or None without one."""
    match = _NVIDIA_DRIVER_VERSION.search(_read(path) or "")
    return match[1] if match else None


def torch_determinism(torch) -> dict[str, Any]:
    """The settings that decide whether torch's CUDA kernels give the same bits twice (for the manifest)."""
    return {
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }


def detect_machine(environ: Mapping[str, str] | None = None) -> MachineFacts:
    """This machine's facts, its CPUs capped by $RL_HARNESS_CPUS in `environ` (default: this process's)."""
    cpu_count, cpu_limit = usable_cpu_count()
    try:
        share = env_vars.cpu_share(environ)
    except ValueError as error:
        raise HardwareError(str(error)) from None
    if share is not None and share < cpu_count:
        cpu_count, cpu_limit = share, f"${env_vars.CPU_SHARE_ENV}={share} (of {cpu_limit} {cpu_count})"
    cuda_available, gpu_count, gpu_model, cuda_version, mps_available = False, 0, None, None, False
    determinism_settings = None
    apple_silicon = sys.platform == "darwin" and python_platform.machine() == "arm64"
    if (_nvidia_device_visible() or apple_silicon) and importlib.util.find_spec("torch"):
        import torch

        cuda_available = torch.cuda.is_available()
        if cuda_available:
            gpu_count = torch.cuda.device_count()
            gpu_model = torch.cuda.get_device_name(0)
            cuda_version = torch.version.cuda
            determinism_settings = torch_determinism(torch)
        mps_available = apple_silicon and torch.backends.mps.is_available()
    return MachineFacts(
        cpu_count=cpu_count,
        cpu_count_os=os.cpu_count(),
        cpu_limit=cpu_limit,
        cuda_available=cuda_available,
        gpu_count=gpu_count,
        gpu_model=gpu_model,
        cuda_version=cuda_version,
        mps_available=mps_available,
        platform=python_platform.platform(),
        nvidia_driver_version=nvidia_driver_version(),
        torch_determinism=determinism_settings,
    )


def choose_profile(requested: str, facts: MachineFacts, env_runner: str = BATCHED_ENV_RUNNER) -> HardwareProfile:
    """The profile for `requested` (one of PROFILES) on a machine described by `facts`, sampling with
    `env_runner` (one of ENV_RUNNERS)."""
    if requested not in PROFILES:
        raise HardwareError(f"unknown hardware profile {requested!r}; use one of {', '.join(PROFILES)}")
    if env_runner not in ENV_RUNNERS:
        raise HardwareError(f"unknown --env-runner {env_runner!r}; use one of {', '.join(ENV_RUNNERS)}")
    name = "cpu" if requested == PORTABLE_PROFILE else requested
    if requested == "auto":
        name = "cuda" if facts.cuda_available else "mps" if facts.mps_available else "cpu"
    if name == "cuda" and not facts.cuda_available:
        raise HardwareError(
            "--hardware-profile cuda, but torch sees no CUDA device "
            f"(NVIDIA driver: {facts.nvidia_driver_version or 'none found'}); use --hardware-profile auto or "
            "cpu, or on a GPU machine build with `--config=cuda` (CUDA torch; docs/building.md)"
        )
    if requested == PORTABLE_PROFILE and python_platform.machine() not in X86_64_MACHINES:
        raise HardwareError(
            f"--hardware-profile {PORTABLE_PROFILE} pins x86-64 kernels, and this machine is"
            f" {python_platform.machine()}; use --hardware-profile cpu"
        )
    if name == "mps" and not facts.mps_available:
        raise HardwareError("--hardware-profile mps, but MPS is not available here; use --hardware-profile auto or cpu")
    return HardwareProfile(
        name=PORTABLE_PROFILE if requested == PORTABLE_PROFILE else name,
        requested=requested,
        learner_device="cuda" if name == "cuda" else "cpu",
        torch_device=name,
        num_gpus_per_learner=1 if name == "cuda" else 0,
        # The driver (which hosts the local learner) keeps one CPU; each runner gets one.
        max_env_runners=facts.cpu_count - 1,
        torch_threads=TORCH_THREADS,
        num_cpus=facts.cpu_count,
        kernel_dispatch=portable_kernel_dispatch() if requested == PORTABLE_PROFILE else {},
        env_runner=env_runner,
    )


def numpy_simd_module():
    """numpy's compiled module that holds its SIMD baseline, dispatch targets and the CPU features it found."""
    try:
        from numpy._core import _multiarray_umath
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath
    return _multiarray_umath


def portable_kernel_dispatch() -> dict[str, str]:
    """PORTABLE_KERNEL_DISPATCH plus numpy's switch for every SIMD target its build dispatches to."""
    return {**PORTABLE_KERNEL_DISPATCH, "NPY_DISABLE_CPU_FEATURES": " ".join(numpy_simd_module().__cpu_dispatch__)}


def determinism(profile: HardwareProfile, plan: SamplingPlan, runner: str) -> dict:
    """Whether two same-seed runs with these settings should agree bit for bit on this machine.

    Only one process stepping envs and learning in a fixed order, on CPU with one torch thread,
    is; docs/harness.md has the table and the measurements behind it.
    """
    reasons = []
    if runner != "direct":
        reasons.append(f"the {runner} runner interleaves trials by timing")
    if plan.num_env_runners > 0 and not plan.pipelined:
        reasons.append(f"{plan.num_env_runners} remote env runner(s) deliver episodes in timing order")
    if profile.learner_device != "cpu":
        reasons.append(f"the learner runs on {profile.learner_device}, whose kernels are not deterministic")
    if profile.torch_threads != 1:
        reasons.append(
            f"{profile.torch_threads} torch threads: bit-identity is only established for one (docs/harness.md)"
        )
    if reasons:
        return {"expected": False, "why": "; ".join(reasons)}
    if plan.pipelined:
        return {
            "expected": True,
            "why": "pipelined: each remote runner samples batch k+1 with the weights update k starts from (policy"
            " lag 1), collected in runner order whatever the timing; CPU learner, one torch thread. A"
            " different run from the same seed's sequential one",
            "scope": platform.IDENTITY_SCOPE,
        }
    return {
        "expected": True,
        "why": "local env runner, CPU learner, one torch thread: one process in a fixed order",
        "scope": platform.IDENTITY_SCOPE,
    }


def process_environment(profile: HardwareProfile) -> dict[str, str]:
    """The variables every process of a run gets: torch threads, and the pinned kernel dispatch (cpu-portable)."""
    threads = str(profile.torch_threads)
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **profile.kernel_dispatch}


def apply_process_settings(profile: HardwareProfile) -> None:
    """Torch threads and kernel dispatch for this process (threads: if torch is loaded) and for processes it starts."""
    os.environ.update(process_environment(profile))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(profile.torch_threads)
        skip_uninitialized_fill(torch)


def skip_uninitialized_fill(torch) -> None:
    """Keeps torch's deterministic algorithms, without their fill of every new tensor's memory.

    RLlib's seeding turns on `torch.use_deterministic_algorithms`, which also fills the memory
    of the tensors torch creates uninitialized (`torch.empty` and its kin, `resize_`) with
    NaN, so that a read of uninitialized memory gives the same bits every time. A program that
    reads none is as deterministic without the fill, torch's documentation says
    (`torch.utils.deterministic.fill_uninitialized_memory`), and the harness's results are the same bits
    (docs/harness.md, Determinism). The fill cost the main job's update ~2 ms of 85-135
    (docs/performance.md). A process-wide setting: the harness makes it where it builds RLlib's
    pieces (`apply_process_settings`, and `BatchedEnvRunner` for runner and trial processes).
    """
    torch.utils.deterministic.fill_uninitialized_memory = False
