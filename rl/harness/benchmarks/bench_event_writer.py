"""The TensorBoard event writer's cost per metrics row, and its CRC-32C's per record.

    bazel run //rl/harness:bench_event_writer            # prints one JSON object
    python -m rl.harness.benchmarks.bench_event_writer --rows 2000

A row of ROW_SCALARS scalars (the size of an RLlib PPO row) is written `--rows` times through
`ScalarEvents.write` (encode, frame, checksum, append, flush) into a temporary folder; the CRC of
a CRC_BYTES-byte record (what such a row encodes to) is timed on its own.

    ms_per_row     the median over --repeats of the mean time of one `ScalarEvents.write`
    us_per_crc     the median time of one masked CRC-32C over CRC_BYTES bytes
"""

import argparse
import json
import statistics
import sys
import tempfile
import time

ROW_SCALARS = 98
CRC_BYTES = 5000


def _row(index: int) -> dict:
    row = {f"learners/default_policy/metric_{i:03d}": 0.5 + i + index * 1e-3 for i in range(ROW_SCALARS - 2)}
    row.update({"num_env_steps_sampled_lifetime": 4000 * (index + 1), "training_iteration": index + 1})
    return row


def _ms_per_row(rows: int) -> float:
    from rl.harness.run import tensorboard_events

    with tempfile.TemporaryDirectory() as folder:
        events = tensorboard_events.ScalarEvents(folder, "bench")
        events.write(_row(0))  # opens the file and writes its version record
        start = time.perf_counter()
        for index in range(1, rows + 1):
            events.write(_row(index))
        elapsed = time.perf_counter() - start
        events.close()
    return elapsed / rows * 1e3


def _us_per_crc(calls: int) -> float:
    from rl.harness.run.tensorboard_events import masked_crc32c

    data = bytes(range(256)) * (CRC_BYTES // 256) + bytes(CRC_BYTES % 256)
    start = time.perf_counter()
    for _ in range(calls):
        masked_crc32c(data)
    return (time.perf_counter() - start) / calls * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    row_times = [_ms_per_row(args.rows) for _ in range(args.repeats)]
    crc_times = [_us_per_crc(args.rows) for _ in range(args.repeats)]
    print(
        json.dumps(
            {
                "row_scalars": ROW_SCALARS,
                "rows": args.rows,
                "repeats": args.repeats,
                "ms_per_row": round(statistics.median(row_times), 4),
                "crc_bytes": CRC_BYTES,
                "us_per_crc": round(statistics.median(crc_times), 2),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
