"""What a lost machine costs a run mirrored to a store: the training redone after SIGKILL and a resume elsewhere.

    PPO_RECIPE_ITERATIONS=200 bazel run //rl/harness:bench_lost_machine -- --module rl.harness.tests.ppo_cartpole_recipe
    RL_HARNESS_CPUS=1 PYTHONPATH=$PWD python -m rl.harness.benchmarks.bench_lost_machine \
        --module experiments.mess3.reward_only --resumed-rows 3       # from the workspace: any recipe module

A run of `--module` (with `--seed`, and `--` any further run flags) mirrors to a local S3-compatible
server (moto's, from the test tools' venv) at the harness's default cadences. When its counter (the
budget's: env steps or iterations, from the manifest's `runner.stop`) reaches `--kill-at` of the
budget, its whole process group gets SIGKILL, as a machine that is lost. A fresh folder, with
nothing of the run, then resumes it with `--resume-from <run-id>` and the store alone; the resumed
run is stopped with SIGINT after `--resumed-rows` rows (0: it runs to the end).

    redone_fraction    budget trained again: the last row before the kill minus the fetched checkpoint
    joins              the resumed run's carried rows and its own continue the parent's without a gap
    resume_to_first_row_s  from starting the resume (records and checkpoint fetched) to its first new row
"""

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

from rl.harness import env_vars
from rl.harness.run import records
from rl.harness.tests import s3_server

_COUNTERS = {"env_steps": "num_env_steps_sampled_lifetime", "training_iterations": "training_iteration"}


def _start(module, arguments, environment, log: pathlib.Path):
    """The run in its own session; its log goes to `log` (a pipe nobody reads would stop it once full)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "rl.harness.commands.cli", module, *arguments],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=handle,
            start_new_session=True,
        )


def _rows(folder: pathlib.Path) -> list[dict]:
    path = folder / records.METRICS_FILE
    return records.read_json_lines(str(path)) if path.exists() else []


def _wait(process, log: pathlib.Path, until, what: str, poll_s: float = 1.0):
    while not until():
        if process.poll() is not None:
            raise SystemExit(f"the run ended (exit {process.returncode}) before {what}: {log.read_text()[-2000:]}")
        time.sleep(poll_s)


def _budget(results: pathlib.Path) -> tuple[str, int]:
    """(the metrics key of the budget's counter, its bound) from the run's manifest."""
    stop = json.loads((results / records.MANIFEST_FILE).read_text())["runner"]["stop"]
    name = next(name for name in _COUNTERS if stop.get(name))
    return _COUNTERS[name], int(stop[name])


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", required=True, help="the recipe module to run (importable here)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kill-at", type=float, default=0.9, help="fraction of the budget trained when killed")
    parser.add_argument("--resumed-rows", type=int, default=0, help="stop the resumed run after these rows (0: never)")
    parser.add_argument("run_flags", nargs="*", help="after --: further flags of the run (e.g. --set k=v)")
    options = parser.parse_args(argv)
    load_before = os.getloadavg()
    with s3_server.S3Server() as server, tempfile.TemporaryDirectory() as folder:
        key_id, key = server.read_write
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(sys.path),
            env_vars.STORE_ENV: f"s3://{server.bucket}/bench",
            env_vars.STORE_ENDPOINT_ENV: server.endpoint,
            env_vars.S3_KEY_ID_ENV: key_id,
            env_vars.S3_KEY_ENV: key,
        }
        lost, fresh = pathlib.Path(folder, "lost"), pathlib.Path(folder, "fresh")
        common = ["--seed", str(options.seed), *options.run_flags]
        started = time.monotonic()
        parent_log, child_log = lost / "log.txt", fresh / "log.txt"
        parent = _start(
            options.module,
            [
                "--run-id",
                "lost",
                "--upload-artifacts",
                "--results-dir",
                str(lost / "r"),
                "--artifacts-dir",
                str(lost / "a"),
                *common,
            ],
            environment,
            parent_log,
        )
        _wait(
            parent,
            parent_log,
            lambda: (lost / "r" / "lost" / records.MANIFEST_FILE).exists() and _rows(lost / "a" / "lost"),
            "its first row",
        )
        counter, bound = _budget(lost / "r" / "lost")
        _wait(
            parent,
            parent_log,
            lambda: (_rows(lost / "a" / "lost")[-1].get(counter) or 0) >= options.kill_at * bound,
            f"{options.kill_at:.0%} of its budget",
        )
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
        parent_s = time.monotonic() - started
        trained = _rows(lost / "a" / "lost")

        started = time.monotonic()
        child = _start(
            options.module,
            [
                "--run-id",
                "resumed",
                "--resume-from",
                "lost",
                "--no-upload-artifacts",
                "--results-dir",
                str(fresh / "r"),
                "--artifacts-dir",
                str(fresh / "a"),
                *common,
            ],
            environment,
            child_log,
        )
        _wait(child, child_log, lambda: _rows(fresh / "a" / "resumed"), "the resumed run's first row")
        first_row_s = time.monotonic() - started
        if options.resumed_rows:
            _wait(child, child_log, lambda: len(_rows(fresh / "a" / "resumed")) >= options.resumed_rows, "its rows")
            child.send_signal(signal.SIGINT)
        if child.wait() not in (0, 128 + signal.SIGINT):
            raise SystemExit(f"the resumed run exited {child.returncode}: {child_log.read_text()[-2000:]}")
        resumed = json.loads((fresh / "r" / "resumed" / records.MANIFEST_FILE).read_text())["parent_run"]
        carried = records.read_json_lines(str(fresh / "a" / "resumed" / records.LINEAGE_METRICS_FILE))
        iterations = [row["training_iteration"] for row in carried + _rows(fresh / "a" / "resumed")]
    checkpoint_count = resumed["env_steps"] if counter == _COUNTERS["env_steps"] else resumed["iteration"]
    return {
        "module": options.module,
        "budget": {counter: bound},
        "cores": len(os.sched_getaffinity(0)),
        "killed_at": {counter: trained[-1][counter], "fraction": round(trained[-1][counter] / bound, 4)},
        "checkpoint": pathlib.PurePath(resumed["checkpoint"]).name,
        "checkpoint_fraction": round(checkpoint_count / bound, 4),
        "redone_fraction": round((trained[-1][counter] - checkpoint_count) / bound, 4),
        "joins": iterations == list(range(1, len(iterations) + 1)),
        "parent_until_killed_s": round(parent_s, 1),
        "resume_to_first_row_s": round(first_row_s, 1),
        "load_average_1m": {"before": round(load_before[0], 2), "after": round(os.getloadavg()[0], 2)},
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
