"""Fake instances as local processes: each instance the fake API makes runs its onstart script here.

    hosts = fake_hosts.FakeHosts(fake, tmp_path / "hosts", workdir=setup.workdir, environment={...})
    fake.hosts.append(hosts)            # told of every create, stop (preempt) and destroy
    hosts.folder(instance_id)           # that instance's own folder: its workdir, its log
    hosts.running()                     # ids whose process is alive
    hosts.close()                       # SIGKILL to every process left

An instance's process starts once the fake API reports it running (after `boot_delay_s`; never on a
machine of `never_boot_machines`) and runs the real bootstrap script with bash, in a folder of its
own (the script's workdir points there), with the environment vast.ai gives a container: the
create call's `env`, CONTAINER_ID and CONTAINER_API_KEY (its own key), and RLH_VAST_URL naming the
fake API. `bazel` is a stub that runs `python -m rl.harness.commands.cli <recipe> <the run's args>`
with $RLH_FAKE_PYTHON and $RLH_FAKE_RECIPE (`study <module>` for a study's target), so the run is a real
harness run; `apt-get` fails (every
tool must be there). A stop or destroy kills its whole session with SIGKILL, as a lost machine does.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import threading
import time

_BAZEL_STUB = """#!/bin/bash
# Stands in for `bazel run <flags> <target> -- <args>`: a real harness run of $RLH_FAKE_RECIPE with <args>.
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
read -ra recipe <<<"$RLH_FAKE_RECIPE"  # a recipe's module, or `study <module>` for a study's target
exec "$RLH_FAKE_PYTHON" -m rl.harness.commands.cli "${recipe[@]}" "$@"
"""
_APT_STUB = "#!/bin/sh\necho 'apt-get must not run on a fake instance: every tool is present' >&2\nexit 9\n"


def _sessions() -> dict[int, int]:
    """{pid: session id} of every process this user can see."""
    found = {}
    for entry in pathlib.Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError, ValueError):
            continue
        if entry.name.isdigit():
            found[int(entry.name)] = int(fields[3])
    return found


def _kill_session(session: int) -> None:
    """SIGKILL to every process of `session`, as a machine that is lost ends a container: `timeout` puts the
    run in a process group of its own, so killing the script's group alone would leave the run going."""
    for _ in range(50):
        members = [pid for pid, sid in _sessions().items() if sid == session]
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


class FakeHosts:
    def __init__(self, fake, root: pathlib.Path, *, workdir: str, environment: dict[str, str]):
        self.fake = fake
        self.root = pathlib.Path(root)
        self.workdir = workdir
        self.environment = dict(environment)
        self.stubs = self.root / "stubs"
        self.stubs.mkdir(parents=True, exist_ok=True)
        for name, text in (("bazel", _BAZEL_STUB), ("apt-get", _APT_STUB)):
            (self.stubs / name).write_text(text)
            (self.stubs / name).chmod(0o755)
        self._processes: dict[int, subprocess.Popen] = {}
        self._timers: dict[int, threading.Timer] = {}
        self._lock = threading.Lock()
        self.started_at: dict[int, float] = {}

    def folder(self, instance_id: int) -> pathlib.Path:
        return self.root / str(instance_id)

    def running(self) -> list[int]:
        with self._lock:
            return [i for i, process in self._processes.items() if process is not None and process.poll() is None]

    # ---- told by the fake API ------------------------------------------------------------------------------

    def created(self, row: dict) -> None:
        if row["machine_id"] in self.fake.never_boot_machines:
            return
        timer = threading.Timer(self.fake.boot_delay_s, self._start, args=(row,))
        timer.daemon = True
        with self._lock:
            self._timers[row["id"]] = timer
        timer.start()

    def stopped(self, instance_id: int) -> None:
        self._kill(instance_id)

    def destroyed(self, instance_id: int) -> None:
        self._kill(instance_id)

    # ---- processes ---------------------------------------------------------------------------------------

    def _start(self, row: dict) -> None:
        instance_id = row["id"]
        folder = self.folder(instance_id)
        folder.mkdir(parents=True, exist_ok=True)
        work = str(folder / "work")
        # Its own folder, and its log in a file only (never this machine's PID 1 output).
        script = row["onstart"].replace(self.workdir, work).replace("/proc/1/fd/1", "/dev/null/none")
        (folder / "onstart.sh").write_text(script)
        run_id = re.search(r"^readonly RUN_ID=(\S+)$", script, flags=re.MULTILINE).group(1).strip("'")
        self.fake.log_files[instance_id] = folder / "work" / "out" / "vast" / run_id / "bootstrap.log"
        env = {
            **self.environment,
            "PATH": f"{self.stubs}:{os.environ['PATH']}",
            "HOME": str(folder),
            "CONTAINER_ID": str(instance_id),
            "CONTAINER_API_KEY": self.fake.container_key(instance_id),
            "RLH_VAST_URL": self.fake.url,
            **{key: value for key, value in row["extra_env"]},
        }
        with self._lock:
            if instance_id not in self.fake.instances or instance_id in self._processes:
                return  # destroyed (or stopped) while it booted
            with open(folder / "stderr.txt", "w") as stderr:
                self._processes[instance_id] = subprocess.Popen(
                    ["bash", str(folder / "onstart.sh")],
                    env=env,
                    cwd=folder,
                    start_new_session=True,
                    stdin=subprocess.DEVNULL,
                    stdout=stderr,
                    stderr=stderr,
                )
            self.started_at[instance_id] = time.time()

    def _kill(self, instance_id: int) -> None:
        with self._lock:
            timer = self._timers.pop(instance_id, None)
            process: subprocess.Popen | None = self._processes.get(instance_id)
            if timer is not None:
                timer.cancel()
            self._processes.setdefault(instance_id, process)
        if process is not None:
            _kill_session(process.pid)
            process.wait(timeout=30)

    def close(self) -> None:
        """Kills every process left (the fake API may already be gone)."""
        with self._lock:
            ids = list(self._processes) + list(self._timers)
        for instance_id in ids:
            self._kill(instance_id)
