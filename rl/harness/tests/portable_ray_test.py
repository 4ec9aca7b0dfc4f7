"""Slow: a local Ray's workers, started by a run with the cpu-portable profile, run the pinned kernels too."""

import json
import subprocess
import sys

import pytest

from rl.harness.tests import run_helpers
from rl.harness.training import hardware

# What a run's driver does once restarted with the pins: start a local Ray, then work in its workers.
_DRIVER = """
import json, ray
from rl.harness.training import lifecycle, numeric_platform
lifecycle.init_ray(None, 1)
try:
    worker = ray.get(ray.remote(lambda: numeric_platform.gather().to_dict()).remote())
finally:
    ray.shutdown()
print(json.dumps(worker))
"""


@pytest.mark.slow
def test_local_ray_workers_inherit_the_portable_kernel_dispatch():
    pins = hardware.portable_kernel_dispatch()
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER],
        env=run_helpers.child_env(**pins),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    worker = json.loads(done.stdout.strip().splitlines()[-1])
    assert worker["kernel_dispatch"].items() >= pins.items()
    assert worker["torch_cpu_capability"] == hardware.PORTABLE_TORCH_CAPABILITY and worker["numpy_simd"] == []
    assert worker["libraries"]["openblas_core"] == pins["OPENBLAS_CORETYPE"]
