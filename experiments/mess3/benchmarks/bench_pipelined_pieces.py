"""What bounds pipelined PPO on the main job: CPU seconds of each piece of an iteration, and the speed-up they allow.

    bazel run //experiments/mess3:bench_pipelined_pieces       # prints one JSON object (~1 min)

In one process, on one 2048-step batch of the main job at a time (its module, env, 32 envs, the
harness's BatchedEnvRunner), medians over `--repeats` of CPU seconds (`time.process_time`, which
other processes' load inflates far less than wall time):
- runner side: `sample`, dropping what the Learner does not read (`trim_episodes`, as PipelinedPPO's
  runners do), pickling the batch's episodes as Ray does (`pickle_episodes`), taking the Learner's
  weights (`weights_in`);
- driver side: unpickling the episodes (`unpickle_episodes`), the update of a pipelined config's
  Learner (its KL reference recomputed) on the trimmed batch, as PipelinedPPO hands it over
  (`update_pipelined`), sending the weights (`weights_out`); and the
  update of the sequential path (`update`, embeddings kept).
On two free cores the sequential iteration takes `sample + update`, the pipelined one the longer
side; `bound` is their ratio: the most pipelining can gain over the default path, before the
Algorithm's own per-iteration work, which both pay.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import pickle
import statistics
import time

import torch
from ray import cloudpickle
from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME, WEIGHTS_SEQ_NO

from experiments.mess3.benchmarks.bench_sampling import STEPS_PER_SAMPLE, WARMUP_SAMPLES, build_runner
from rl.learners.pipelined import learner_info_keys, trim_for_learner

RUNNER_SIDE = ("sample", "trim_episodes", "pickle_episodes", "weights_in")
DRIVER_SIDE = ("unpickle_episodes", "update_pipelined", "weights_out")


def _cpu_seconds(function):
    start = time.process_time()
    result = function()
    return result, time.process_time() - start


def measure(repeats: int) -> dict:
    runner = build_runner("harness")
    learner = runner.config.build_learner(env=runner.env.unwrapped)
    pipelined_config = runner.config.copy(copy_frozen=False)
    pipelined_config.pipelined = True  # what PipelinedPPOConfig says to its Learner
    pipelined_learner = pipelined_config.build_learner(env=runner.env.unwrapped)

    def weights() -> dict:
        return {
            COMPONENT_RL_MODULE: learner.module[DEFAULT_MODULE_ID].get_state(inference_only=True),
            WEIGHTS_SEQ_NO: 0,
        }

    def update(episodes, learner=learner) -> None:
        learner.update(
            episodes=episodes,
            timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: STEPS_PER_SAMPLE},
            num_epochs=runner.config.num_epochs,
            minibatch_size=runner.config.minibatch_size,
            shuffle_batch_per_epoch=True,
        )

    runner.module.set_state(weights()[COMPONENT_RL_MODULE])
    for _ in range(WARMUP_SAMPLES):
        runner.sample(num_timesteps=STEPS_PER_SAMPLE)
    seconds: dict[str, list[float]] = {}
    for _ in range(repeats):
        episodes, seconds_taken = _cpu_seconds(lambda: runner.sample(num_timesteps=STEPS_PER_SAMPLE))
        timed = {"sample": seconds_taken}
        sequential = copy.deepcopy(episodes)  # the Learner connector and the trimming change episodes in place
        _, timed["trim_episodes"] = _cpu_seconds(
            functools.partial(trim_for_learner, runner.module, episodes, info_keys=learner_info_keys(runner.config))
        )
        pickled, timed["pickle_episodes"] = _cpu_seconds(functools.partial(cloudpickle.dumps, episodes))
        handed_over, timed["unpickle_episodes"] = _cpu_seconds(functools.partial(pickle.loads, pickled))
        pipelined_learner.set_state(learner.get_state())  # both updates start from the same weights
        _, timed["update"] = _cpu_seconds(functools.partial(update, sequential))
        _, timed["update_pipelined"] = _cpu_seconds(functools.partial(update, handed_over, pipelined_learner))
        sent, timed["weights_out"] = _cpu_seconds(lambda: cloudpickle.dumps(weights()))
        _, timed["weights_in"] = _cpu_seconds(lambda sent=sent: runner.set_state(pickle.loads(sent)))
        runner.module.set_state(weights()[COMPONENT_RL_MODULE])  # RLlib's set_state skips a weights number it has
        for name, value in timed.items():
            seconds.setdefault(name, []).append(value)
    ms = {name: statistics.median(values) * 1e3 for name, values in seconds.items()}
    sides = {
        "runner": sum(ms[name] for name in RUNNER_SIDE),
        "driver": sum(ms[name] for name in DRIVER_SIDE),
        "sequential": ms["sample"] + ms["update"],
    }
    return {
        "ms": {name: round(value, 2) for name, value in ms.items()},
        "episodes_mib": round(len(pickled) / 2**20, 2),
        "iteration_ms": {name: round(value, 1) for name, value in sides.items()},
        "bound": round(sides["sequential"] / max(sides["runner"], sides["driver"]), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed batches (medians)")
    options = parser.parse_args()
    torch.set_num_threads(1)
    print(json.dumps({"env_steps": STEPS_PER_SAMPLE, "repeats": options.repeats, **measure(options.repeats)}, indent=1))


if __name__ == "__main__":
    main()
