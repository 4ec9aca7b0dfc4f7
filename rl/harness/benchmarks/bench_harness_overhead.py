"""Harness overhead per training iteration against the same RLlib loop without the harness.

    bazel run //rl/harness:bench_harness_overhead            # prints one JSON object
    bazel run //rl/harness:bench_harness_overhead -- --iterations 12 --no-store

The loops train PPO on CartPole-v1 in the same Ray cluster, checkpointing every
CHECKPOINT_EVERY iterations: a plain RLlib loop, the harness, and the harness mirroring the run
to a local S3-compatible server (moto's, started here from the test tools' venv) as it trains.
`Algorithm.train` is timed in each; what happens between two train() calls is the loop's
bookkeeping: for the plain loop the checkpoint saves, for the harness also the metrics row,
summary curves, progress line, atomic records and manifest. The mirror is a thread beside
training, so its cost shows in train() itself (the CPU it takes) more than between the calls.

    ratio       (train + harness bookkeeping) / (train + plain bookkeeping), with the same
                train time: the harness's own cost, free of run-to-run noise (target <= 1.01)
    ratio_wall  harness iteration period / plain iteration period as measured (noisier)
    with_store  the same two for the mirrored harness against the plain loop, and its train time
"""

import argparse
import contextlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import time

CHECKPOINT_EVERY = 5
TARGET_RATIO = 1.01
_TRAIN_CALLS: list[tuple[float, float]] = []


def _config():
    from ray.rllib.algorithms.ppo import PPOConfig

    return (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=1000, minibatch_size=250, num_epochs=2)
    )


def run(context):
    """The benchmark's recipe: the harness's direct runner."""
    from rl.harness.training import runners

    iterations = int(os.environ["BENCH_ITERATIONS"])
    return runners.run_direct(
        context, _config(), stop=runners.StopRule(training_iterations=iterations), checkpoint_every=CHECKPOINT_EVERY
    )


def _timed_train(train):
    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return train(self, *args, **kwargs)
        finally:
            _TRAIN_CALLS.append((start, time.perf_counter()))

    return timed


def _figures(calls):
    """(mean train s, mean s between train calls, mean period s) over steady-state iterations."""
    calls = calls[1:]  # the first iteration warms up (lazy init, compilation)
    train = statistics.fmean(end - start for start, end in calls)
    between = statistics.fmean(nxt[0] - cur[1] for cur, nxt in itertools.pairwise(calls))
    period = statistics.fmean(nxt[0] - cur[0] for cur, nxt in itertools.pairwise(calls))
    return train, between, period


def _plain_loop(profile, seed, iterations, folder):
    from rl.harness.training import configs, hardware

    config = _config()
    sampling = hardware.place_envs(profile, configs.default_parallel_envs(config.total_train_batch_size))
    config = hardware.apply_to(profile, config, sampling).debugging(seed=seed)
    algo = config.build_algo()
    try:
        for iteration in range(1, iterations + 1):
            algo.train()
            if iteration % CHECKPOINT_EVERY == 0 or iteration == iterations:
                algo.save_to_path(os.path.join(folder, f"iter_{iteration:06d}"))
    finally:
        algo.stop()


def _harness_run(iterations, folder, store=None):
    """The harness's run; with `store` (the variables naming a store), mirrored to it as it trains."""
    from rl.harness.commands import cli

    os.environ["BENCH_ITERATIONS"] = str(iterations)
    os.environ.update(store or {})
    try:
        status = cli.main(
            [
                "bench",
                "rl.harness.benchmarks.bench_harness_overhead",
                "--hardware-profile",
                "cpu",
                "--upload-artifacts" if store else "--no-upload-artifacts",
                "--results-dir",
                os.path.join(folder, "results"),
                "--artifacts-dir",
                os.path.join(folder, "artifacts"),
            ]
        )
    finally:
        for name in store or {}:
            del os.environ[name]
    if status != 0:
        raise SystemExit(f"the harness run failed with exit status {status}")


def _against_plain(plain, loop) -> dict:
    """A loop's figures (mean train s, s between calls, period s) against the plain loop's."""
    ratio = (loop[0] + loop[1]) / (loop[0] + plain[1])
    return {
        "ratio": round(ratio, 4),
        "ratio_wall": round(loop[2] / plain[2], 4),
        "within_target": ratio <= TARGET_RATIO,
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each loop, in ABBA order against drift")
    parser.add_argument(
        "--store",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the harness mirroring to a local S3-compatible server (moto's)",
    )
    options = parser.parse_args(argv)

    import ray
    from absl import logging
    from ray.rllib.algorithms.algorithm import Algorithm

    from rl.harness.training import hardware

    logging.set_verbosity(logging.INFO)  # the harness's progress lines are part of its cost

    profile = hardware.choose_profile("cpu", hardware.detect_machine())
    hardware.apply_process_settings(profile)
    Algorithm.train = _timed_train(Algorithm.train)
    kinds = ["plain", "harness", *(["with_store"] if options.store else [])]
    order = ([*kinds, *reversed(kinds)] * options.repeats)[: len(kinds) * options.repeats]
    figures = {kind: [] for kind in kinds}
    with contextlib.ExitStack() as stack:
        store = None
        if options.store:
            from rl.harness.tests import s3_server

            store = stack.enter_context(s3_server.S3Server()).store_env("bench")
        ray.init(address="local", num_cpus=profile.num_cpus, include_dashboard=False)  # never a running cluster
        stack.callback(ray.shutdown)
        for kind in order:
            with tempfile.TemporaryDirectory() as folder:
                _TRAIN_CALLS.clear()
                if kind == "plain":
                    _plain_loop(profile, 42, options.iterations, folder)
                else:
                    _harness_run(options.iterations, folder, store if kind == "with_store" else None)
                figures[kind].append(_figures(_TRAIN_CALLS))
    means = {kind: [statistics.fmean(run[column] for run in figures[kind]) for column in range(3)] for kind in kinds}
    plain, harness = means["plain"], means["harness"]
    found = {
        "iterations": options.iterations,
        "runs_per_loop": options.repeats,
        "checkpoint_every": CHECKPOINT_EVERY,
        "train_s_per_iteration": {kind: round(means[kind][0], 4) for kind in kinds},
        "between_iterations_ms": {kind: round(means[kind][1] * 1e3, 2) for kind in kinds},
        "harness_overhead_ms_per_iteration": round((harness[1] - plain[1]) * 1e3, 2),
        **_against_plain(plain, harness),
        "target_ratio": TARGET_RATIO,
    }
    if options.store:
        found["with_store"] = _against_plain(plain, means["with_store"])
    return found


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
