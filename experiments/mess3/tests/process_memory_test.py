"""TreeMemory counts the memory of the processes a process starts, which getrusage does not."""

import resource
import subprocess
import sys
import time

from experiments.mess3.benchmarks import process_memory

CHILD_MIB = 200


def test_the_peak_includes_a_child_process_memory():
    child = [sys.executable, "-c", f'import time; block = b"x" * ({CHILD_MIB} * 2**20); time.sleep(1.5)']
    with process_memory.TreeMemory(period_s=0.05) as memory:
        started = subprocess.Popen(child)  # the bytes are written: resident at once
        time.sleep(1.0)
        own_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        started.wait()
    assert memory.peak_mib >= own_mib + 0.9 * CHILD_MIB


def test_without_children_the_peak_is_this_process():
    with process_memory.TreeMemory(period_s=0.05) as memory:
        time.sleep(0.3)
    own_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert 0.5 * own_mib <= memory.peak_mib <= own_mib * 1.05
