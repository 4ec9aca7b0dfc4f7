"""This process's numeric platform (run/platform.py's record), from torch, numpy and the loaded BLAS.

    record = numeric_platform.gather()              # in the run's process, after its hardware profile applied
    record = numeric_platform.probe(environment)    # what a process started with `environment` would record

`gather` imports torch (when installed) to ask which kernels it dispatches to; `probe` does the
same in a fresh process, so `reproduce` can say before it runs whether the platform differs.
Run as a module it prints the record as JSON (what `probe` reads).
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping

from rl.harness import env_vars
from rl.harness.errors import HarnessError
from rl.harness.run import platform
from rl.harness.run.machine import HardwareProfile
from rl.harness.training import hardware

_MKL_VERSION = re.compile(r"Math Kernel Library Version ([^\s]+)")
_ONEDNN_VERSION = re.compile(r"(?:MKL-DNN|oneDNN) v([^\s]+)")
# The symbols OpenBLAS builds name its core query by: plain, and numpy's scipy-openblas (ILP64 or not).
_OPENBLAS_CORENAME = ("openblas_get_corename", "scipy_openblas_get_corename64_", "scipy_openblas_get_corename")
_PROBE_TIMEOUT_S = 120


class PlatformProbeError(HarnessError):
    """The numeric platform of a reproduction could not be probed; the message names the fix."""


def numpy_simd() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(numpy's dispatched SIMD targets enabled in this process, its compiled baseline)."""
    umath = hardware.numpy_simd_module()
    features = umath.__cpu_features__
    return (tuple(name for name in umath.__cpu_dispatch__ if features.get(name)), tuple(umath.__cpu_baseline__))


def _loaded_openblas() -> str | None:
    """The OpenBLAS shared library loaded in this process (numpy's), from /proc/self/maps."""
    try:
        with open("/proc/self/maps") as handle:
            paths = {line.split()[-1] for line in handle if "openblas" in line.lower() and "/" in line}
    except OSError:
        return None
    return min(paths) if paths else None


def openblas_facts() -> dict[str, str | None]:
    """numpy's OpenBLAS: its version and the core type it dispatched to (which OPENBLAS_CORETYPE overrides)."""
    import numpy

    blas = (numpy.show_config(mode="dicts").get("Build Dependencies") or {}).get("blas") or {}
    facts = {"numpy_blas": f"{blas.get('name')} {blas.get('version')}" if blas else None, "openblas_core": None}
    path = _loaded_openblas()
    if path is not None:
        library = ctypes.CDLL(path)
        for symbol in _OPENBLAS_CORENAME:
            if hasattr(library, symbol):
                function = getattr(library, symbol)
                function.restype = ctypes.c_char_p
                facts["openblas_core"] = function().decode()
                break
    return facts


def _torch_facts() -> tuple[str | None, dict, dict, platform.GpuPlatform | None]:
    """(torch's CPU capability, its thread counts, MKL and oneDNN versions, the GPU), or Nones without torch."""
    if importlib.util.find_spec("torch") is None:
        return None, {}, {}, None
    import torch

    build = torch.__config__.show()
    mkl, onednn = _MKL_VERSION.search(build), _ONEDNN_VERSION.search(build)
    libraries = {"mkl": mkl[1] if mkl else None, "onednn": onednn[1] if onednn else None}
    threads = {"torch": torch.get_num_threads(), "torch_interop": torch.get_num_interop_threads()}
    gpu = None
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        gpu = platform.GpuPlatform(
            model=torch.cuda.get_device_name(0),
            compute_capability=f"{major}.{minor}",
            cuda=torch.version.cuda,
            cudnn=None if cudnn is None else str(cudnn),
            driver=hardware.nvidia_driver_version(),
            determinism=hardware.torch_determinism(torch),
        )
    return torch.backends.cpu.get_cpu_capability(), threads, libraries, gpu


def gather() -> platform.NumericPlatform:
    """This process's numeric platform (imports torch and numpy if they are installed)."""
    capability, threads, libraries, gpu = _torch_facts()
    simd, baseline = numpy_simd()
    return platform.NumericPlatform(
        cpu=platform.read_cpu(),
        torch_cpu_capability=capability,
        kernel_dispatch=env_vars.kernel_dispatch_variables(),
        numpy_simd=simd,
        numpy_simd_baseline=baseline,
        threads={**threads, **env_vars.thread_variables()},
        libraries={**libraries, **openblas_facts()},
        gpu=gpu,
    )


def check_pinned(profile: HardwareProfile) -> None:
    """HardwareError when `profile` pins kernels but this process did not start with the pins (numpy and OpenBLAS
    read theirs when they load) or torch dispatched before they were set."""
    if not profile.kernel_dispatch:
        return
    torch = sys.modules.get("torch")
    capability = torch.backends.cpu.get_cpu_capability() if torch is not None else hardware.PORTABLE_TORCH_CAPABILITY
    simd, _ = numpy_simd()
    if (
        env_vars.kernel_dispatch_variables().items() >= profile.kernel_dispatch.items()
        and not simd
        and capability == hardware.PORTABLE_TORCH_CAPABILITY
    ):
        return
    raise hardware.HardwareError(
        f"--hardware-profile {profile.name} pins the kernels before torch and numpy load, but this process loaded"
        f" them first (torch {capability}, numpy {' '.join(simd) or 'baseline'}); start the run through the"
        " rl-harness command or an rl_experiment binary, which restart with the pins set"
    )


def _package_root() -> str:
    """The folder holding the `rl` package this module was imported from (the workspace or the runfiles tree)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def probe(environment: Mapping[str, str]) -> platform.NumericPlatform:
    """The record a fresh process with `environment` gathers (this interpreter, this harness)."""
    python_path = os.pathsep.join(filter(None, [_package_root(), environment.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", __name__],
        env={**environment, "PYTHONPATH": python_path},
        capture_output=True,
        text=True,
        timeout=_PROBE_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise PlatformProbeError(
            f"probing the numeric platform failed ({detail}); run `{sys.executable} -m {__name__}` to see why"
        )
    return platform.NumericPlatform.from_dict(json.loads(done.stdout))


if __name__ == "__main__":
    print(json.dumps(gather().to_dict(), sort_keys=True))
