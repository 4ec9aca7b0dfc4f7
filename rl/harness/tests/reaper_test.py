"""Ray's processes end with the run's driver, even when it is killed with SIGKILL (training/reaper.py)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rl.harness.run.status import process_start_ticks
from rl.harness.tests import run_helpers
from rl.harness.training import reaper

# A driver that starts the watchdog, then a stubborn helper in a session of its own (as Ray's agents
# are: SIGTERM ignored, reparented to init once the driver is gone); prints the helper's pid.
_DRIVER = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    from rl.harness.training.reaper import Reaper
    watchdog = Reaper.start()
    helper = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM,"
                               " signal.SIG_IGN); time.sleep(600)"], start_new_session=True)
    print(helper.pid, flush=True)
    if sys.argv[1] == "release":
        time.sleep(2.5)
        watchdog.release()
        print("released", flush=True)
    time.sleep(600)
""")


def _alive(pid, ticks):
    return process_start_ticks(pid) == ticks


def _start_driver(mode):
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, mode],
        stdout=subprocess.PIPE,
        text=True,
        env=run_helpers.child_env(),
        start_new_session=True,
    )
    helper = int(driver.stdout.readline())
    return driver, helper, process_start_ticks(helper)


def test_a_sigkilled_driver_takes_its_stubborn_helpers_with_it():
    driver, helper, ticks = _start_driver("kill")
    try:
        time.sleep(2.5 * reaper.POLL_S)  # the watchdog has noted the helper
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        run_helpers.wait_for(lambda: not _alive(helper, ticks), 10, "the helper to be killed")
    finally:
        if _alive(helper, ticks):
            os.kill(helper, signal.SIGKILL)


def test_a_released_watchdog_kills_nothing_when_the_driver_ends():
    driver, helper, ticks = _start_driver("release")
    try:
        assert driver.stdout.readline().strip() == "released"
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        time.sleep(3 * reaper.POLL_S)
        assert _alive(helper, ticks)
    finally:
        os.kill(helper, signal.SIGKILL)


@pytest.mark.slow
def test_kill_9_of_a_training_run_leaves_no_ray_process_behind(tmp_path):
    process = run_helpers.start_cli(
        [run_helpers.PPO, "--run-id", "killed", "--results-dir", tmp_path / "r", "--artifacts-dir", tmp_path / "a"],
        PPO_RECIPE_ITERATIONS=1000,
    )
    noted = {}
    try:
        run_helpers.wait_for(lambda: run_helpers.metrics_rows(tmp_path / "a"), 240, "a first metrics row")
        noted = {pid: process_start_ticks(pid) for pid in reaper.descendants(process.pid)}
        names = {open(f"/proc/{pid}/cmdline").read().replace("\0", " ") for pid in noted if _alive(pid, noted[pid])}
        assert any("raylet" in name for name in names) and any(
            "dashboard" in name or "agent" in name for name in names
        ), names
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        run_helpers.wait_for(
            lambda: not [pid for pid, ticks in noted.items() if _alive(pid, ticks)],
            30,
            "every Ray process of the killed run to end",
        )
    finally:
        for pid, ticks in noted.items():
            if _alive(pid, ticks):
                os.kill(pid, signal.SIGKILL)
        run_helpers.stop_group(process)
