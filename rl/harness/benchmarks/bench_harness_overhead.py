"""Harness overhead per training iteration against the same RLlib loop without the harness.

    bazel run //rl/harness:bench_harness_overhead            # prints one JSON object
    python -m rl.harness.benchmarks.bench_harness_overhead --iterations 12

Both loops train PPO on CartPole-v1 in the same Ray cluster, checkpointing every
CHECKPOINT_EVERY iterations. `Algorithm.train` is timed in both; what happens between two
train() calls is the loop's bookkeeping: for the plain loop the checkpoint saves, for the
harness also the metrics row, summary curves, progress line, atomic records and manifest.

    ratio       (train + harness bookkeeping) / (train + plain bookkeeping), with the same
                train time: the harness's own cost, free of run-to-run noise (target <= 1.01)
    ratio_wall  harness iteration period / plain iteration period as measured (noisier)
"""

import argparse
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

    return (PPOConfig().environment("CartPole-v1")
            .training(train_batch_size_per_learner=1000, minibatch_size=250, num_epochs=2))


def run(context):
    """The benchmark's recipe: the harness's direct runner."""
    from rl.harness.training import runners

    iterations = int(os.environ["BENCH_ITERATIONS"])
    return runners.run_direct(context, _config(), stop=runners.StopRule(training_iterations=iterations),
                              checkpoint_every=CHECKPOINT_EVERY)


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
    between = statistics.fmean(nxt[0] - cur[1] for cur, nxt in zip(calls, calls[1:]))
    period = statistics.fmean(nxt[0] - cur[0] for cur, nxt in zip(calls, calls[1:]))
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


def _harness_run(iterations, folder):
    from rl.harness.commands import cli

    os.environ["BENCH_ITERATIONS"] = str(iterations)
    status = cli.main(["bench", "rl.harness.benchmarks.bench_harness_overhead", "--hardware-profile", "cpu",
                       "--no-upload-artifacts", "--results-dir", os.path.join(folder, "results"),
                       "--artifacts-dir", os.path.join(folder, "artifacts")])
    if status != 0:
        raise SystemExit(f"the harness run failed with exit status {status}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each loop, in ABBA order against drift")
    options = parser.parse_args(argv)

    import ray
    from absl import logging
    from ray.rllib.algorithms.algorithm import Algorithm

    from rl.harness.training import hardware

    logging.set_verbosity(logging.INFO)  # the harness's progress lines are part of its cost

    profile = hardware.choose_profile("cpu", hardware.detect_machine())
    hardware.apply_process_settings(profile)
    Algorithm.train = _timed_train(Algorithm.train)
    order = (["plain", "harness", "harness", "plain"] * options.repeats)[:2 * options.repeats]
    figures = {"plain": [], "harness": []}
    ray.init(address="local", num_cpus=profile.num_cpus, include_dashboard=False)  # never a running cluster
    try:
        for index, kind in enumerate(order):
            with tempfile.TemporaryDirectory() as folder:
                _TRAIN_CALLS.clear()
                if kind == "plain":
                    _plain_loop(profile, 42, options.iterations, folder)
                else:
                    _harness_run(options.iterations, folder)
                figures[kind].append(_figures(_TRAIN_CALLS))
    finally:
        ray.shutdown()
    plain, harness = ([statistics.fmean(run[column] for run in figures[kind]) for column in range(3)]
                      for kind in ("plain", "harness"))
    train = harness[0]
    ratio = (train + harness[1]) / (train + plain[1])
    return {
        "iterations": options.iterations,
        "runs_per_loop": options.repeats,
        "checkpoint_every": CHECKPOINT_EVERY,
        "train_s_per_iteration": {"plain": round(plain[0], 4), "harness": round(harness[0], 4)},
        "between_iterations_ms": {"plain": round(plain[1] * 1e3, 2), "harness": round(harness[1] * 1e3, 2)},
        "harness_overhead_ms_per_iteration": round((harness[1] - plain[1]) * 1e3, 2),
        "ratio": round(ratio, 4),
        "ratio_wall": round(harness[2] / plain[2], 4),
        "target_ratio": TARGET_RATIO,
        "within_target": ratio <= TARGET_RATIO,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
