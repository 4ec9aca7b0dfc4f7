"""What every rl/envs benchmark prints beside its figures: the machine and the load it ran under.

load = os.getloadavg()[0]          # before the timed work, which would raise it
print(json.dumps({"figures": figures, **run_info(load)}))
"""

from __future__ import annotations

import os
import platform

import numpy as np


def run_info(load_average_at_start: float) -> dict:
    """The load average (1 minute) at the start, the CPUs, OMP_NUM_THREADS and the versions."""
    return {
        "load_average_1min_at_start": round(load_average_at_start, 2),
        "cpus": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "unset"),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
