"""The machine a run trains on, as plain records: what was found (`MachineFacts`) and how work is placed on it
(`HardwareProfile`). The manifest records both; `RunContext.hardware` carries the profile.

    profile = context.hardware
    profile.torch_device                 # "cpu" | "cuda" | "mps": where a recipe's own torch work goes
    profile.as_dict()                    # what the manifest's `hardware.profile` holds

Gathering the facts and choosing, applying and placing with a profile is `training/hardware.py`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class MachineFacts:
    cpu_count: int  # what this process may use: affinity and cgroup quota respected
    cpu_count_os: int | None
    cpu_limit: str  # where cpu_count came from
    cuda_available: bool
    gpu_count: int
    gpu_model: str | None
    cuda_version: str | None  # the CUDA that torch was built with (torch.version.cuda)
    mps_available: bool
    platform: str
    nvidia_driver_version: str | None = None  # the host's kernel driver, from /proc/driver/nvidia/version
    torch_determinism: dict | None = None  # torch's settings that decide whether GPU kernels are deterministic

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class HardwareProfile:
    name: str  # cpu | cuda | mps
    requested: str  # what --hardware-profile said
    learner_device: str  # where RLlib's learner runs: cpu | cuda
    torch_device: str  # for a recipe's own torch code: cpu | cuda | mps
    num_gpus_per_learner: int
    max_env_runners: int  # remote runners at most: one CPU each, the driver keeps one
    torch_threads: int
    num_cpus: int  # what a local Ray cluster is started with
    # Environment variables pinning the numeric kernels of every process of the run (cpu-portable), else empty.
    kernel_dispatch: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Which EnvRunner samples single-agent configs (--env-runner): the harness's batched loop or RLlib's own.
    env_runner: str = "batched"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
