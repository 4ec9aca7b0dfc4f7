"""The main job's Learner connector piece by piece: RLlib's runner and pieces against the harness's.

    bazel run //experiments/mess3:bench_learner_connector        # prints one JSON object (~1 min)

One 2048-step batch of the main job (its module, env, 32 envs) goes through the Learner
connector `--repeats` times (a fresh copy of the episodes each time), each piece timed;
figures are medians in ms:
- `rllib`: episodes from RLlib's EnvRunner (list episodes, the harness's connector pipelines)
  through RLlib's AddOneTsToEpisodesAndTruncate and GeneralAdvantageEstimation, with the
  harness's chunking pieces between them;
- `harness`: episodes from the BatchedEnvRunner (numpy) through the pipeline the harness's
  Learner builds (AddBootstrapStep, BatchedGeneralAdvantageEstimation, whose values come from
  the critic embeddings sampled with the Learner's weights).
Both sides use the same Learner's module; without autograd, as the Learner runs it.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

import torch
from ray.rllib.connectors.learner.add_one_ts_to_episodes_and_truncate import AddOneTsToEpisodesAndTruncate
from ray.rllib.connectors.learner.general_advantage_estimation import GeneralAdvantageEstimation
from ray.rllib.core import DEFAULT_MODULE_ID

from experiments.mess3.benchmarks.bench_sampling import STEPS_PER_SAMPLE, WARMUP_SAMPLES, build_runner


def _timed_pieces(learner, pieces: list, episodes: list, repeats: int) -> dict:
    times: dict[str, list[float]] = {}
    for _ in range(repeats):
        copies, batch = copy.deepcopy(episodes), {}
        for piece in pieces:
            start = time.perf_counter()
            with torch.no_grad():
                batch = piece(rl_module=learner.module, batch=batch, episodes=copies, shared_data={}, metrics=None)
            times.setdefault(type(piece).__name__, []).append(time.perf_counter() - start)
    figures = {name: round(statistics.median(seconds) * 1e3, 2) for name, seconds in times.items()}
    return {**figures, "total": round(sum(figures.values()), 2)}


def measure(repeats: int) -> dict:
    batched, rllib = build_runner("harness"), build_runner("harness_rllib_runner")
    learner = batched.config.build_learner(env=batched.env.unwrapped)
    for runner in (batched, rllib):  # as the Algorithm syncs them: GAE reads the sampled critic embeddings
        runner.module.set_state(learner.module[DEFAULT_MODULE_ID].get_state(inference_only=True))
    harness_pieces = list(learner._learner_connector.connectors)  # the Learner's pipeline, as built
    advantages = harness_pieces[-1]
    rllib_pieces = (
        [AddOneTsToEpisodesAndTruncate()]
        + harness_pieces[1:-1]
        + [GeneralAdvantageEstimation(gamma=advantages.gamma, lambda_=advantages.lambda_)]
    )
    figures = {}
    for name, runner, pieces in (("rllib", rllib, rllib_pieces), ("harness", batched, harness_pieces)):
        for _ in range(WARMUP_SAMPLES):
            runner.sample(num_timesteps=STEPS_PER_SAMPLE)
        figures[name] = _timed_pieces(learner, pieces, runner.sample(num_timesteps=STEPS_PER_SAMPLE), repeats)
        runner.stop()
    figures["harness_to_rllib"] = round(figures["harness"]["total"] / figures["rllib"]["total"], 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed passes over the batch (medians)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(json.dumps({"env_steps": STEPS_PER_SAMPLE, "repeats": args.repeats, **measure(args.repeats)}, indent=2))


if __name__ == "__main__":
    main()
