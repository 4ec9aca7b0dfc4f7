"""Several agents in one run: each trained by RLlib's train loop in turn, with its own seed, curves and checkpoints.

    from rl.harness.training import agents, runners

    def run(context):
        configs = {"mlp": mlp_config, "transformer": transformer_config}   # science: the recipe's
        for trained in agents.train_in_turn(context, configs, stop=runners.StopRule(env_steps=400_000)):
            module = load_rl_module(trained.checkpoint)                   # e.g. value each policy
            trained.name, trained.row[metric_keys.RETURN]

Each agent (in the order of `configs`) gets the hardware profile, the sampling plan and the seed
of the stream `rllib/<name>` (`runners.prepare_config`), trains with `algo.train()` until `stop`
(`runners.train_rows`: its rows carry `agent` and keep their curves apart under the trial
`<name>`), and is saved once at the end to checkpoints/<name>/iter_<N> (recorded with `trial_id`
`<name>`). The caller's loop body runs after that agent's algorithm stopped and before the next is
built, with Ray still up. On a cluster (`--ray-address`) the sampling plans count the cluster's
CPUs, as runners.run_direct's do. A stop request (SIGINT/SIGTERM, `--stop-at-*`) ends the agent
in training at its iteration (checkpointed) and trains no further agent; one before an agent's
first iteration saves nothing for it. Such runs do not resume.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Iterator, Mapping, Optional

from absl import logging

from rl.harness.training import hardware, runners
from rl.harness.run.context import RunContext
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION

RUNNER_KIND = "agents in turn"
AGENT_TAG = "agent"  # the column of every row naming its agent


def seed_stream(name: str) -> str:
    """The seed stream of agent `name`."""
    return f"rllib/{name}"


@dataclasses.dataclass(frozen=True)
class TrainedAgent:
    name: str
    row: dict  # its last metrics row (the counters it stopped at)
    checkpoint: pathlib.Path  # its final checkpoint folder (an RLlib Algorithm checkpoint)


def train_in_turn(context: RunContext, configs: Mapping[str, object], *, stop: runners.StopRule,
                  parallel_envs: Optional[int] = None) -> Iterator[TrainedAgent]:
    """Trains the agents of `configs` (name -> AlgorithmConfig) one after another; yields each once saved.

    `parallel_envs` is how many envs each agent steps together (runners.run_direct's). Every
    config is checked before Ray starts and prepared before the first agent trains; the manifest's
    `runner` section records each agent's algorithm, seed, sampling plan, determinism and the
    nodes of its env runners.
    """
    if context.resume is not None:
        raise ValueError("a run that trains several agents in turn does not resume; start a new run"
                         " (drop --resume-from)")
    if not configs:
        raise ValueError("train_in_turn needs at least one agent: pass {name: AlgorithmConfig}")
    for config in configs.values():
        runners.plan_sampling(context, config, parallel_envs)  # a bad parallel_envs fails before Ray starts
    if runners.stopping(context, "start-up"):
        return
    with runners.ray_cluster(context) as profile:
        if runners.stopping(context, "ray.init"):
            return
        placed = dataclasses.replace(context, hardware=profile)  # on a cluster: the cluster's CPUs
        prepared = {name: runners.prepare_config(placed, config, context.seeds.integer(seed_stream(name)),
                                                 parallel_envs=parallel_envs)
                    for name, config in configs.items()}
        context.recorder.update_manifest(runner={
            "kind": RUNNER_KIND, "stop": dataclasses.asdict(stop),
            "agents": {name: _described(placed, config, parallel_envs) for name, config in prepared.items()}})
        for name, config in prepared.items():
            trained = None if context.recorder.stop_requested else _train(context, name, config, stop)
            if trained is None:
                logging.warning("stop requested: agent %s and those after it are not trained", name)
                return
            yield trained


def _described(context: RunContext, config, parallel_envs: Optional[int]) -> dict:
    sampling = runners.plan_sampling(context, config, parallel_envs)
    return {"algorithm": config.algo_class.__name__, "rllib_seed": config.seed, "sampling": runners.sampling_record(sampling, config),
            "determinism": hardware.determinism(context.hardware, sampling, "direct")}


def _train(context: RunContext, name: str, config, stop: runners.StopRule) -> Optional[TrainedAgent]:
    """Trains and saves agent `name`; None when a stop request came before its first iteration."""
    algo = config.build_algo()
    try:
        runner = context.recorder.manifest["runner"]
        described = {**runner["agents"][name], "env_runner_nodes": runners.env_runner_nodes(algo)}
        context.recorder.update_manifest(runner={**runner, "agents": {**runner["agents"], name: described}})
        row = None
        for row in runners.train_rows(context, algo, stop, trial=name, tags={AGENT_TAG: name}):
            pass
        if row is None:
            return None
        with context.recorder.checkpoint(iteration=int(row[ITERATION]), env_steps=int(row[ENV_STEPS]),
                                         trial=name) as folder:
            algo.save_to_path(str(folder))
    finally:
        algo.stop()
    saved = [entry for entry in context.recorder.manifest["checkpoints"] if entry.get("trial_id") == name]
    return TrainedAgent(name=name, row=row, checkpoint=pathlib.Path(context.artifacts_dir) / saved[-1]["path"])
