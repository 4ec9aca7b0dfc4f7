"""Several agents in one run: each trained by RLlib's train loop in turn, with its own seed, curves and checkpoints.

    from rl.harness.training import agents, runners

    def run(context):
        configs = {"mlp": mlp_config, "transformer": transformer_config}   # science: the recipe's
        for trained in agents.train_in_turn(context, configs, stop=runners.StopRule(env_steps=400_000)):
            module = load_rl_module(trained.checkpoint)                   # e.g. value each policy
            trained.name, trained.row[metric_keys.RETURN]

The run goes through the one lifecycle (lifecycle.py). Each agent (in the order of `configs`) gets
the hardware profile, the sampling plan and the seed of the stream `rllib/<name>`
(the lifecycle's preparation), trains with `algo.train()` until `stop` (`lifecycle.AlgorithmTraining`:
its rows carry `agent` and keep their curves apart under the trial
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
from collections.abc import Iterator, Mapping

from absl import logging

from rl.harness.run.context import RunContext
from rl.harness.run.manifest import AgentRecord, AgentsInTurnRunnerRecord
from rl.harness.training import lifecycle, runners
from rl.harness.training.configs import ConfigRequest, PreparedConfig

AGENT_TAG = "agent"  # the column of every row naming its agent


def seed_stream(name: str) -> str:
    """The seed stream of agent `name`."""
    return f"rllib/{name}"


@dataclasses.dataclass(frozen=True)
class TrainedAgent:
    name: str
    row: dict  # its last metrics row (the counters it stopped at)
    checkpoint: pathlib.Path  # its final checkpoint folder (an RLlib Algorithm checkpoint)


class AgentsInTurnRunner(lifecycle.Runner):
    """The agents of one run, each built, trained and saved after the one before it."""

    def __init__(self, configs_by_name: Mapping[str, object], *, stop: runners.StopRule, parallel_envs: int | None):
        self.configs = dict(configs_by_name)
        self.stop, self.parallel_envs = stop, parallel_envs
        self.record: AgentsInTurnRunnerRecord | None = None

    def requests(self, context: RunContext) -> dict[str, ConfigRequest]:
        if context.resume is not None:
            raise lifecycle.ResumeRefused(
                "a run that trains several agents in turn does not resume; start a new run (drop --resume-from)"
            )
        if not self.configs:
            raise ValueError("train_in_turn needs at least one agent: pass {name: AlgorithmConfig}")
        return {
            name: ConfigRequest(config, self.parallel_envs, context.seeds.integer(seed_stream(name)))
            for name, config in self.configs.items()
        }

    def build(self, context: RunContext, prepared: Mapping[str, PreparedConfig]) -> AgentsInTurnRunnerRecord:
        agents = {}
        for name, agent in prepared.items():
            self.configs[name] = agent.config
            agents[name] = AgentRecord(
                algorithm=agent.algorithm,
                rllib_seed=agent.config.seed,
                sampling=agent.sampling,
                determinism=agent.determinism,
            )
        self.record = AgentsInTurnRunnerRecord(stop=dataclasses.asdict(self.stop), agents=agents)
        return self.record

    def train(self, context: RunContext) -> Iterator[TrainedAgent]:
        for name, config in self.configs.items():
            row = (
                None
                if context.session.stop_requested
                else lifecycle.AlgorithmTraining(
                    config,
                    self.stop,
                    trial=name,
                    tags={AGENT_TAG: name},
                    on_built=lambda algo, name=name: self._record_nodes(context, name, algo),
                ).run(context)
            )
            if row is None:
                logging.warning("stop requested: agent %s and those after it are not trained", name)
                return
            saved = context.checkpoints(name)
            yield TrainedAgent(name=name, row=row, checkpoint=context.checkpoint_path(saved[-1]))

    def _record_nodes(self, context: RunContext, name: str, algo) -> None:
        agent = dataclasses.replace(self.record.agents[name], env_runner_nodes=tuple(lifecycle.env_runner_nodes(algo)))
        self.record = dataclasses.replace(self.record, agents={**self.record.agents, name: agent})
        context.session.record_runner(self.record)


def train_in_turn(
    context: RunContext,
    configs_by_name: Mapping[str, object],
    *,
    stop: runners.StopRule,
    parallel_envs: int | None = None,
) -> Iterator[TrainedAgent]:
    """Trains the agents of `configs_by_name` (name -> AlgorithmConfig) one after another; yields each once saved.

    `parallel_envs` is how many envs each agent steps together (runners.run_direct's). Every
    config is checked before Ray starts and prepared before the first agent trains; the manifest's
    `runner` section records each agent's algorithm, seed, sampling plan, determinism and the
    nodes of its env runners.
    """
    yield from lifecycle.run(context, AgentsInTurnRunner(configs_by_name, stop=stop, parallel_envs=parallel_envs))
