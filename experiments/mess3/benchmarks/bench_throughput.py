"""Env steps per second of the main job's training, through the harness vs bare RLlib vs a plain PyTorch loop.

    bazel run //experiments/mess3:bench_throughput                      # prints one JSON object
    bazel run //experiments/mess3:bench_throughput -- --iterations 10 --warmup 3
    bazel run //experiments/mess3:bench_throughput -- --seed-size     # the seed project's Transformer
    bazel run //experiments/mess3:bench_throughput -- --hardware-profile cpu-portable   # kernels pinned
    bazel run //experiments/mess3:bench_throughput -- --parts harness torch_reference --rounds 5 --interleave

One process per part, run one after another on the same machine (so none competes with
another for the 2 cores), all with one torch thread and the main job's model, env and PPO
settings (train batch 2048):

    harness          `reward_only.train` through `rl.harness.commands.cli` (hardware profile `cpu`, the
                     recipe's 32 parallel envs, checkpoints and records included): the period
                     between metrics rows, so the harness's bookkeeping counts
    harness_pipelined  the same with `--set training/pipelined=true` (rl.learners.pipelined: a
                     remote EnvRunner samples the next batch while the Learner updates)
    rllib_default    the same AlgorithmConfig in bare RLlib with RLlib's sampling defaults (PPO:
                     2 remote env runners, 1 env each), `algo.train()` timed
    rllib_split      bare RLlib with the 32 envs in one remote runner: the placement the hardware
                     profile did not choose on 2 CPUs (learner and sampling in separate processes)
    torch_reference  torch_reference.run: a minimal PPO loop in plain PyTorch over the same
                     TransformerModel and the same 32 vectorised envs (an approximate limit)

Steady state: the first `--warmup` iterations are dropped, the next `--iterations` timed.
The plain loop stays the yardstick of both harness parts: it is what a user would write instead,
and the targets are ratios to it (docs/performance.md, "Pipelined PPO").
`--rounds N` runs the parts in turn N times (harness, peers, harness, peers, ...), so that a
slow minute of the machine hits both sides of a ratio: figures are then medians over rounds,
and `ratio_rounds` lists each round's ratio (single rounds of the main job's ratio ranged 0.66-0.80
within an hour on a quiet machine: docs/performance.md).
`--interleave` runs each round's parts side by side instead, one process each, taking turns
iteration by iteration (`turns`): only one part works at a time, and each part's iterations
meet the same seconds of the machine as the other's, whose speed drifts within seconds; each
part's waits are taken out of its own timing, and each round another part takes the first turn.
Not for harness_pipelined, whose runner samples across iterations.
`seconds_per_iteration` splits an iteration into sampling and learning (both RLlib parts: PPO's
`synchronous_parallel_sample` and `LearnerGroup.update` timed in the driver; the reference times
its own phases; for `harness_pipelined` sampling is the wait for the batch in flight);
`learner_samples_per_s` is train batch / learning seconds; `peak_rss_mib` is each part's own
process (ru_maxrss), `peak_tree_rss_mib` the largest sum of resident memory over it and every
process it started (Ray's and its remote runners), sampled every 0.2 s, and `peak_tree_pss_mib` the
same sum of proportional set sizes (a page several processes map, the libraries' code above all,
counted once: what the tree takes from the machine).
`--hardware-profile cpu-portable` pins every part's kernel dispatch as that profile does (its
variables set before each part's process starts), to measure what the portable profile costs.
`--seed-size` runs every part with the seed project's Transformer (controlled_mess3.SEED_PROJECT_SIZE:
d_model 96, 4 heads, 3 blocks, feed-forward 384; the harness part gets it as reward_only's `--set`
values), the rest of the main job unchanged.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time

from experiments.mess3.benchmarks import process_memory, turns

# Re-exported: this module is the harness part's recipe, and the harness checks --set against a recipe's HYPERPARAMETERS.
from experiments.mess3.reward_only import HYPERPARAMETERS  # noqa: F401

PARTS = ("harness", "harness_pipelined", "rllib_default", "rllib_split", "torch_reference")
# The reported ratios (medians of each round's): name, part, yardstick, figure.
RATIOS = [
    *(
        (f"ratio_vs_{peer}", "harness", peer, "env_steps_per_s")
        for peer in ("rllib_default", "rllib_split", "torch_reference")
    ),
    ("pipelined_ratio_vs_torch_reference", "harness_pipelined", "torch_reference", "env_steps_per_s"),
    ("pipelined_ratio_vs_harness", "harness_pipelined", "harness", "env_steps_per_s"),
    ("pipelined_memory_vs_harness", "harness_pipelined", "harness", "peak_tree_rss_mib"),
    ("pipelined_pss_vs_harness", "harness_pipelined", "harness", "peak_tree_pss_mib"),
]
PIPELINED = {"training/pipelined": "true"}
# The throughput targets (docs/performance.md): against bare RLlib, against the plain PyTorch loop, and the seed-size rate.
TARGETS = {
    "ratio_vs_rllib_default": 8.0,
    "ratio_vs_torch_reference": 0.95,
    "harness_env_steps_per_s": 3000.0,
    "pipelined_ratio_vs_torch_reference": 1.5,
    "pipelined_memory_vs_harness (at most)": 1.3,
}
SEED_SIZE_TARGETS = {"harness_env_steps_per_s": 4000.0}
_ITERATIONS_ENV = "BENCH_THROUGHPUT_ITERATIONS"
# With --interleave, this process's seat at the parts' turns (set by the pool's initializer); else None.
_seat: turns.Seat | None = None
# What a part that waited too long for its turn is told to try.
_TURN_HINT = "run the parts one after another (without --interleave) to see why"


def _take_seat(seat: turns.Seat) -> None:
    """A part process's initializer under --interleave: the seat its iterations take turns at."""
    global _seat
    _seat = seat


def _take_turn() -> None:
    """Waits for this part's next turn (under --interleave; else returns at once); an iteration starts after it."""
    if _seat is not None:
        _seat.take(hint=_TURN_HINT)


def run(context):
    """The harness part's recipe: the main job's training stage for a fixed number of updates."""
    from experiments.mess3 import reward_only

    batch = reward_only.ppo_config(context).total_train_batch_size
    return reward_only.train(context, env_steps=int(os.environ[_ITERATIONS_ENV]) * batch)


class _PhaseTimer:
    """Seconds of each PPO sampling and learner-update call in this process (by wrapping both)."""

    def __init__(self):
        from ray.rllib.algorithms.ppo import ppo
        from ray.rllib.core.learner.learner_group import LearnerGroup

        from rl.learners.pipelined import PipelinedPPO

        self.sample_s: list[float] = []
        self.learn_s: list[float] = []
        ppo.synchronous_parallel_sample = self._timed(ppo.synchronous_parallel_sample, self.sample_s)
        PipelinedPPO._collect_batch = self._timed(PipelinedPPO._collect_batch, self.sample_s)
        LearnerGroup.update = self._timed(LearnerGroup.update, self.learn_s)

    @staticmethod
    def _timed(function, seconds: list):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds.append(time.perf_counter() - start)

        return timed

    def split(self, warmup: int) -> dict:
        return {
            "sample_s": statistics.fmean(self.sample_s[warmup:]),
            "learn_s": statistics.fmean(self.learn_s[warmup:]),
        }


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _harness(iterations: int, warmup: int, sizes: dict, *, profile: str, pipelined: bool = False) -> dict:
    from ray.tune.trainable import Trainable

    from rl.harness import read_manifest
    from rl.harness.commands import cli
    from rl.harness.run import records
    from rl.harness.run import status as run_status

    os.environ[_ITERATIONS_ENV] = str(warmup + iterations)
    phases = _PhaseTimer()
    train = Trainable.train

    # The harness trains in this process through Algorithm.train, which is Tune's Trainable.train: each
    # iteration, with the records and checkpoints after it, then runs in one turn.
    def train_in_turn(self):
        _take_turn()
        return train(self)

    Trainable.train = train_in_turn
    with tempfile.TemporaryDirectory() as folder:
        status = cli.main(
            [
                "bench",
                "experiments.mess3.benchmarks.bench_throughput",
                "--hardware-profile",
                profile,
                "--no-upload-artifacts",
                "--run-id",
                "bench",
                "--results-dir",
                os.path.join(folder, "results"),
                "--artifacts-dir",
                os.path.join(folder, "artifacts"),
                *[f"--set={name}={value}" for name, value in {**sizes, **(PIPELINED if pipelined else {})}.items()],
            ]
        )
        if status != 0:
            raise RuntimeError(f"the harness run failed with status {status}")
        manifest = read_manifest(os.path.join(folder, "results", "bench"))
        rows = records.read_json_lines(os.path.join(folder, "artifacts", "bench", records.METRICS_FILE))
    first, last = (run_status.parse_time(rows[index]["harness/logged_at"]) for index in (warmup - 1, -1))
    waited = _seat.waited_within(first, last) if _seat is not None else 0.0
    steps = rows[-1]["num_env_steps_sampled_lifetime"] - rows[warmup - 1]["num_env_steps_sampled_lifetime"]
    return {
        "env_steps_per_s": steps / (last - first - waited),
        **phases.split(warmup),
        "sampling": manifest.runner.sampling,
        "peak_rss_mib": _peak_rss_mib(),
    }


def _bare_rllib(iterations: int, warmup: int, sizes: dict, *, split: bool) -> dict:
    import ray

    from experiments.mess3.task import controlled_mess3 as task

    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False)  # never a running cluster
    config = task.ppo_config(smoke=False, model_config=task.transformer_config(sizes)).debugging(seed=0)
    if split:
        config = config.env_runners(num_env_runners=1, num_envs_per_env_runner=task.PARALLEL_ENVS)
    phases = _PhaseTimer()
    algo = config.build_algo()
    try:
        seconds, results = [], []
        for _ in range(warmup + iterations):
            _take_turn()
            start = time.perf_counter()
            results.append(algo.train())
            seconds.append(time.perf_counter() - start)
    finally:
        algo.stop()
        ray.shutdown()
    steps = [result["env_runners"]["num_env_steps_sampled"] for result in results]
    return {
        "env_steps_per_s": sum(steps[warmup:]) / sum(seconds[warmup:]),
        **phases.split(warmup),
        "sampling": {
            "num_env_runners": config.num_env_runners,
            "num_envs_per_env_runner": config.num_envs_per_env_runner,
        },
        "peak_rss_mib": _peak_rss_mib(),
    }


def _torch_reference(iterations: int, warmup: int, sizes: dict) -> dict:
    from experiments.mess3.benchmarks import torch_reference
    from experiments.mess3.task import controlled_mess3 as task

    result = torch_reference.run(
        iterations=warmup + iterations,
        warmup=warmup,
        num_envs=task.PARALLEL_ENVS,
        train_batch=task.ppo_config(smoke=False).total_train_batch_size,
        seed=0,
        model_config=task.transformer_config(sizes),
        before_iteration=_take_turn,
    )
    return {
        "env_steps_per_s": result["env_steps_per_s"],
        "sample_s": statistics.fmean(result["sample_s"][warmup:]),
        "learn_s": statistics.fmean(result["learn_s"][warmup:]),
        "sampling": {"num_envs": task.PARALLEL_ENVS, "vector_env": "gymnasium SyncVectorEnv"},
        "peak_rss_mib": _peak_rss_mib(),
    }


def _measure(part: str, iterations: int, warmup: int, sizes: dict, profile: str) -> dict:
    try:
        import torch

        torch.set_num_threads(1)
        measure = {
            "harness": functools.partial(_harness, profile=profile),
            "harness_pipelined": functools.partial(_harness, profile=profile, pipelined=True),
            "rllib_default": functools.partial(_bare_rllib, split=False),
            "rllib_split": functools.partial(_bare_rllib, split=True),
            "torch_reference": _torch_reference,
        }[part]
        with process_memory.TreeMemory() as memory:
            figures = measure(iterations, warmup, sizes)
    finally:
        if _seat is not None:
            _seat.leave()
    return {**figures, "peak_tree_rss_mib": memory.peak_mib, "peak_tree_pss_mib": memory.peak_pss_mib}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=6, help="timed training iterations (>= 5)")
    parser.add_argument("--warmup", type=int, default=2, help="iterations dropped first (>= 1)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument(
        "--seed-size", action="store_true", help="the seed project's Transformer (d96, 4 heads, 3 blocks)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="run the parts in turn this many times; report medians")
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="each round runs the parts side by side, taking turns iteration by iteration (not harness_pipelined)",
    )
    parser.add_argument(
        "--hardware-profile",
        choices=("cpu", "cpu-portable"),
        default="cpu",
        help="cpu-portable: every part with the portable profile's pinned kernel dispatch",
    )
    options = parser.parse_args(argv)
    if options.iterations < 5 or options.warmup < 1:
        parser.error("steady state needs --iterations >= 5 and --warmup >= 1")
    if options.rounds < 1:
        parser.error("--rounds must be >= 1")
    if options.interleave and "harness_pipelined" in options.parts:
        parser.error(
            "--interleave times parts that stop working between iterations, but harness_pipelined's runner samples "
            "across them (into the other parts' turns); measure it without --interleave"
        )
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"  # inherited by every part's process
    if options.hardware_profile == "cpu-portable":
        from rl.harness.training import hardware

        os.environ.update(hardware.portable_kernel_dispatch())  # before any part's process loads numpy or torch
    from experiments.mess3.task import controlled_mess3 as task

    sizes = task.SEED_PROJECT_SIZE if options.seed_size else {}
    rounds = {part: [] for part in options.parts}
    spawn = multiprocessing.get_context("spawn")
    arguments = (options.iterations, options.warmup, sizes, options.hardware_profile)
    for round_index in range(options.rounds):
        announce = f"bench_throughput: round {round_index + 1}/{options.rounds}"
        if options.interleave:
            # Each round another part takes the first turn, so no part keeps one place in the turns.
            shift = round_index % len(options.parts)
            order = [*options.parts[shift:], *options.parts[:shift]]
            print(f"{announce}, {' and '.join(order)} taking turns...", file=sys.stderr)
            for part, figures in zip(order, _interleaved(spawn, order, arguments)):
                rounds[part].append(figures)
            continue
        for part in options.parts:
            print(f"{announce}, {part} ({options.warmup} + {options.iterations} iterations)...", file=sys.stderr)
            with spawn.Pool(1) as pool:  # a fresh process per part: its own peak RSS, no state shared
                rounds[part].append(pool.apply(_measure, (part, *arguments)))
    figures = {part: _median_figures(measured) for part, measured in rounds.items()}
    rate = {part: figure["env_steps_per_s"] for part, figure in figures.items()}
    batch = task.ppo_config(smoke=False).total_train_batch_size
    report = {
        "model_config": task.transformer_config(sizes),
        "hardware_profile": options.hardware_profile,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "train_batch": batch,
        "parallel_envs": task.PARALLEL_ENVS,
        "iterations": {"warmup": options.warmup, "timed": options.iterations},
        "interleaved": options.interleave,
        "env_steps_per_s": {part: round(value, 1) for part, value in rate.items()},
        "learner_samples_per_s": {part: round(batch / figure["learn_s"], 1) for part, figure in figures.items()},
        "seconds_per_iteration": {
            part: {"sample": round(figure["sample_s"], 4), "learn": round(figure["learn_s"], 4)}
            for part, figure in figures.items()
        },
        "peak_rss_mib": {part: round(figure["peak_rss_mib"], 1) for part, figure in figures.items()},
        "peak_tree_rss_mib": {part: round(figure["peak_tree_rss_mib"], 1) for part, figure in figures.items()},
        "peak_tree_pss_mib": {part: round(figure["peak_tree_pss_mib"], 1) for part, figure in figures.items()},
        "sampling": {part: figure["sampling"] for part, figure in figures.items()},
        "targets": SEED_SIZE_TARGETS if options.seed_size else TARGETS,
    }
    for name, ours, theirs, figure in RATIOS:
        if ours in rounds and theirs in rounds:
            ratios = [mine[figure] / peer[figure] for mine, peer in zip(rounds[ours], rounds[theirs])]
            report[name] = round(statistics.median(ratios), 3)
            if options.rounds > 1:
                report.setdefault("ratio_rounds", {})[name] = [round(ratio, 3) for ratio in ratios]
    print(json.dumps(report, indent=1))


def _interleaved(spawn, parts: list[str], arguments: tuple) -> list[dict]:
    """Each part's figures from one process per part, all at once, taking turns iteration by iteration.

    A part that fails, or whose process dies, leaves the turns at once (here, where its own
    process may not have), so the others finish before its error is raised.
    """
    table = turns.Table(len(parts), spawn)
    executors = [
        concurrent.futures.ProcessPoolExecutor(
            1, mp_context=spawn, initializer=_take_seat, initargs=(table.seat(index),)
        )
        for index in range(len(parts))
    ]
    try:
        pending = {
            executor.submit(_measure, part, *arguments): index
            for index, (executor, part) in enumerate(zip(executors, parts))
        }
        for done in concurrent.futures.as_completed(pending):
            if done.exception() is not None:
                table.seat(pending[done]).leave()
        return [future.result() for future in pending]
    finally:
        for executor in executors:
            executor.shutdown()


def _median_figures(measured: list[dict]) -> dict:
    """One part's figures over rounds: the median of every number, the first round's sampling plan."""
    numbers = ("env_steps_per_s", "sample_s", "learn_s", "peak_rss_mib", "peak_tree_rss_mib", "peak_tree_pss_mib")
    return {**measured[0], **{key: statistics.median(figure[key] for figure in measured) for key in numbers}}


if __name__ == "__main__":
    main()
