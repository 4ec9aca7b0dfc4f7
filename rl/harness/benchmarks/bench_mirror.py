"""A run's mirror against a local S3-compatible server (moto's): lag, CPU and memory beside the run.

    bazel run //rl/harness:bench_mirror                        # prints one JSON object
    bazel run //rl/harness:bench_mirror -- --checkpoint-mib 20 --period-s 4 --checkpoints 10

A stand-in run writes a metrics row every 50 ms and, every `--period-s`, a checkpoint of
`--checkpoint-mib` into a `.partial-*` folder renamed into place, as `RunSession.checkpoint` does;
`LiveMirror` sends it at the run's default interval. Another client polls the store.

    lag_*_s         from a checkpoint renamed into place to its last file in the store
    mirror_cpu_s    CPU time of the mirror's thread (pyarrow's own I/O threads are in process_cpu_s)
    process_cpu_s   CPU time of the whole process: the mirror, pyarrow's threads, the stand-in run and
                    the poller; an upper bound on what mirroring costs
    max_rss_growth_mib  growth of the process's peak memory while the run and its mirror ran
"""

import argparse
import json
import os
import pathlib
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time

from rl.harness import env_vars
from rl.harness.remote import run_mirror, stores
from rl.harness.run import records
from rl.harness.run.layout import RunLayout
from rl.harness.tests import s3_server

_EXPERIMENT = "bench.mirror"


def _stand_in_run(layout: RunLayout, source: pathlib.Path, options, placed: dict) -> None:
    with open(layout.artifacts_dir / records.METRICS_FILE, "a") as metrics:
        for index in range(1, options.checkpoints + 1):
            end = time.monotonic() + options.period_s
            while time.monotonic() < end:
                metrics.write(json.dumps({"training_iteration": index, "values": [0.1] * 50}) + "\n")
                metrics.flush()
                time.sleep(0.05)
            partial = pathlib.Path(tempfile.mkdtemp(dir=layout.checkpoints_dir, prefix=".partial-"))
            shutil.copyfile(source, partial / "state.bin")
            (partial / records.CHECKPOINT_STATE_FILE).write_text("{}")
            name = f"iter_{index:06d}"
            partial.rename(layout.checkpoints_dir / name)
            placed[name] = time.monotonic()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-mib", type=int, default=20)
    parser.add_argument("--period-s", type=float, default=4.0)
    parser.add_argument("--checkpoints", type=int, default=10)
    options = parser.parse_args(argv)
    interval_s, drain_s = env_vars.mirror_seconds()
    with s3_server.S3Server() as server, tempfile.TemporaryDirectory() as folder:
        key_id, key = server.read_write
        store = stores.open_store(
            stores.load(
                {
                    env_vars.STORE_ENV: f"s3://{server.bucket}/bench",
                    env_vars.STORE_ENDPOINT_ENV: server.endpoint,
                    env_vars.S3_KEY_ID_ENV: key_id,
                    env_vars.S3_KEY_ENV: key,
                }
            )
        )
        layout = RunLayout(pathlib.Path(folder, "results"), pathlib.Path(folder, "artifacts"), "bench", False)
        layout.results_dir.mkdir(parents=True)
        layout.checkpoints_dir.mkdir(parents=True)
        source = pathlib.Path(folder, "state.bin")
        with open(source, "wb") as handle:
            handle.writelines(os.urandom(1 << 20) for _ in range(options.checkpoint_mib))
        mirror = run_mirror.LiveMirror(run_mirror.RunMirror(store, layout, _EXPERIMENT), interval_s=interval_s)
        mirror_cpu = [0.0]
        one_pass = mirror._pass

        def timed_pass():
            start = time.thread_time()
            try:
                return one_pass()
            finally:
                mirror_cpu[0] += time.thread_time() - start

        mirror._pass = timed_pass

        placed, arrived, stop = {}, {}, threading.Event()
        reader = s3_server.reader(server)
        prefix = f"{server.bucket}/{mirror.mirror.run_prefix}/artifacts/checkpoints"

        def poll():
            while not stop.is_set():
                for name in [name for name in placed if name not in arrived]:
                    if s3_server.exists(reader, f"{prefix}/{name}/{records.CHECKPOINT_STATE_FILE}"):
                        arrived[name] = time.monotonic()
                time.sleep(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        usage_before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.monotonic()
        mirror.start()
        _stand_in_run(layout, source, options, placed)
        record = mirror.finish(drain_s=drain_s)
        wall_s = time.monotonic() - start
        usage = resource.getrusage(resource.RUSAGE_SELF)
        time.sleep(0.5)
        stop.set()
        poller.join()
    lags = sorted(arrived[name] - placed[name] for name in arrived)
    process_cpu_s = usage.ru_utime - usage_before.ru_utime + usage.ru_stime - usage_before.ru_stime
    cores = len(os.sched_getaffinity(0))
    return {
        "checkpoint_mib": options.checkpoint_mib,
        "checkpoints": options.checkpoints,
        "period_s": options.period_s,
        "interval_s": interval_s,
        "in_store": len(lags),
        "status": record["status"],
        "lag_median_s": round(statistics.median(lags), 2),
        "lag_p95_s": round(lags[round(0.95 * (len(lags) - 1))], 2),
        "wall_s": round(wall_s, 1),
        "cores": cores,
        "mirror_cpu_s": round(mirror_cpu[0], 2),
        "mirror_cpu_share": round(mirror_cpu[0] / (cores * wall_s), 4),
        "process_cpu_s": round(process_cpu_s, 2),
        "process_cpu_share": round(process_cpu_s / (cores * wall_s), 4),
        "max_rss_growth_mib": round((usage.ru_maxrss - peak_before) / 1024, 1),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
