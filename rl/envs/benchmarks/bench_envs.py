"""Throughput of the envs and belief filters: `bazel run //rl/envs:bench_envs` prints one JSON object.

Every figure is the best of REPEATS timed runs (the machine is shared, so the best run is the
least disturbed one); the load average at the start is printed with them. For one-thread
figures run it as `OMP_NUM_THREADS=1 ./bazelw run //rl/envs:bench_envs` (the JSON says which).

    steps_per_s      env.step calls per second on the unwrapped env, belief tracking included
    updates_per_s    belief updates per second (one belief, or a batch at once)
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from rl.envs.benchmarks.run_info import run_info
from rl.envs.cassandra_machine import CassandraMachineEnv, machine_pomdp, predict_belief
from rl.envs.hmm import belief_step
from rl.envs.mess3 import mess3_env, mess3_process
from rl.envs.pomdp import POMDPEnv

REPEATS = 3


def _best_rate(run, count: int) -> float:
    """count / (fastest of REPEATS timings of run())."""
    timings = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return count / min(timings)


def _env_steps_per_s(env, actions: list[int]) -> float:
    def run():
        env.reset(seed=0)
        for action in actions:
            if env.step(action)[3]:
                env.reset()

    return _best_rate(run, len(actions))


def _mess3() -> dict:
    env = mess3_env("control", observation=("tokens",), episode_length=1000)
    actions = np.random.default_rng(0).integers(0, env.action_space.n, size=50_000).tolist()
    model = mess3_process()
    figures = {"mess3_control_env_steps_per_s": _env_steps_per_s(env, actions)}
    single = model.stationary_distribution()
    tokens = np.random.default_rng(1).integers(0, 3, size=20_000).tolist()

    def single_updates():
        belief = single
        for token in tokens:
            belief = belief_step(model, belief, token)

    figures["mess3_single_belief_updates_per_s"] = _best_rate(single_updates, len(tokens))
    for batch in (10_000, 100_000):
        beliefs = np.tile(single, (batch, 1))
        batch_tokens = np.random.default_rng(2).integers(0, 3, size=(20, batch))

        def batched_updates(beliefs=beliefs, batch_tokens=batch_tokens):
            updated = beliefs
            for step_tokens in batch_tokens:
                updated = belief_step(model, updated, step_tokens)

        figures[f"mess3_batched_belief_updates_per_s_batch_{batch}"] = _best_rate(batched_updates, batch_tokens.size)
    return figures


def _machine() -> dict:
    actions = np.random.default_rng(0).choice(4, size=20_000, p=[0.7, 0.2, 0.05, 0.05]).tolist()
    exact = machine_pomdp(decimals=None)
    figures = {
        "machine_env_steps_per_s_factored_belief": _env_steps_per_s(
            CassandraMachineEnv(observation="belief", episode_length=1000), actions
        ),
        "machine_env_steps_per_s_factored_marginals": _env_steps_per_s(
            CassandraMachineEnv(observation="marginals", episode_length=1000), actions
        ),
        "machine_env_steps_per_s_dense_belief": _env_steps_per_s(
            POMDPEnv(exact, observation="belief", episode_length=1000), actions
        ),
    }
    rng = np.random.default_rng(3)
    belief = rng.dirichlet(np.ones(256))
    repeats = 20_000

    def factored_single():
        for _ in range(repeats):
            predict_belief(belief, 0)

    def dense_single():
        for _ in range(repeats):
            belief @ exact.transitions[0]

    figures["machine_prediction_per_s_single_factored"] = _best_rate(factored_single, repeats)
    figures["machine_prediction_per_s_single_dense"] = _best_rate(dense_single, repeats)
    beliefs = rng.dirichlet(np.ones(256), size=4096)
    batch = len(beliefs)
    figures["machine_prediction_per_s_batch_4096_factored"] = _best_rate(lambda: predict_belief(beliefs, 0), batch)
    figures["machine_prediction_per_s_batch_4096_dense"] = _best_rate(lambda: beliefs @ exact.transitions[0], batch)
    return figures


def main() -> None:
    load = os.getloadavg()[0]
    figures = {**_mess3(), **_machine()}
    print(
        json.dumps(
            {
                "figures": {name: round(value) for name, value in figures.items()},
                "method": f"best of {REPEATS} runs; unwrapped envs",
                **run_info(load),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
