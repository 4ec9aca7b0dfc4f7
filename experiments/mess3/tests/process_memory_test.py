"""TreeMemory counts the memory of the processes a process starts, which getrusage does not."""

import os
import pathlib
import resource
import subprocess
import sys
import time

import numpy as np
import pytest

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


def test_the_sampling_runs_in_a_watcher_process_not_in_a_thread_of_the_measured_one():
    threads = len(os.listdir("/proc/self/task"))
    with process_memory.TreeMemory(period_s=0.05):
        time.sleep(0.3)
        assert len(os.listdir("/proc/self/task")) == threads
        below = process_memory._descendants(os.getpid())[1:]
        assert any(b"process_memory import watch" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes() for pid in below)


def test_a_failed_watcher_ends_in_one_error_not_in_zero_peaks(monkeypatch):
    monkeypatch.setattr(process_memory, "_WATCH", "import sys; sys.exit(3)")
    failed = pytest.raises(RuntimeError, match=r"the memory watcher failed \(exit status 3, output ''\)")
    with failed, process_memory.TreeMemory(period_s=0.05):
        time.sleep(0.1)


def test_pages_a_child_shares_count_in_each_resident_sum_and_once_in_the_proportional_one():
    block = np.ones(CHILD_MIB * 2**20, dtype=np.uint8)  # written before the fork: the child shares its pages
    child = os.fork()
    if child == 0:
        time.sleep(1.5)
        os._exit(0)
    try:
        with process_memory.TreeMemory(period_s=0.05) as memory:
            time.sleep(1.0)
    finally:
        os.waitpid(child, 0)
    own_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert memory.peak_mib >= own_mib + 0.9 * CHILD_MIB
    assert memory.peak_pss_mib <= own_mib + 0.2 * CHILD_MIB
    assert block.sum() == CHILD_MIB * 2**20
