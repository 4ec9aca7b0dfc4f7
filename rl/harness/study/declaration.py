"""A study: agents (recipes) x training seeds, the scores read from each run, the pairs compared.

    # experiments/mess3/belief_study.py
    from rl.harness.study import Score, Study

    STUDY = Study(
        agents={"memoryless": "experiments.mess3.memoryless_agent", "reward_only": "experiments.mess3.reward_only"},
        seeds=(0, 1, 2, 3, 4),
        scores=(Score("value (greedy)", "scores.evaluation.greedy.normalised_value.mean"),),
        pairs=(("reward_only", "memoryless"),),
        statistic="iqm",   # what heads the summary's table: mean (default), median or iqm
    )

    rl-harness study experiments.mess3.belief_study [--smoke]

Every member (agent, seed) is an ordinary run of the agent's recipe with `--seed <seed>`; a
score is a dotted path into what that recipe's `run(context)` returned (summary.json's
`outcome`), so the study knows no experiment. `pairs` are the agent differences reported seed by
seed (the seed fixes the network's initialisation and the episodes, so pairing removes that spread).
`statistic` heads the summary's table (the mean with its t interval, or the median or the
interquartile mean with bootstrap intervals: `statistics.py`); the others stand beside it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Mapping
from typing import Any

from rl.harness.run import metric_keys
from rl.harness.study.statistics import STATISTICS

_AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]{0,40}")  # part of run ids: `<study>-<agent>-s<seed>`


@dataclasses.dataclass(frozen=True)
class Score:
    """A number each run reports: `path` into its outcome (summary.json), `a.b.c` for outcome["a"]["b"]["c"]."""

    name: str
    path: str

    def read(self, outcome: Mapping[str, Any]) -> float | None:
        """The score, or None when the run did not report it (a failed run, a recipe that skips that stage)."""
        value: Any = outcome
        for part in self.path.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return None
            value = value[part]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return float(value)


@dataclasses.dataclass(frozen=True)
class Member:
    """One cell of the grid: an agent, with one setting (a combination of the study's `hyperparameters`), from one root seed."""

    agent: str
    seed: int
    setting: tuple[tuple[str, Any], ...] = ()  # the --set overrides of this member's run

    @property
    def variant(self) -> str:
        """The agent, or the agent with its setting (`reward_only[ppo/lr=0.0005]`): what the summary's rows are."""
        return variant_name(self.agent, self.setting)

    @property
    def name(self) -> str:
        return f"{self.variant}/seed {self.seed}"


def variant_name(agent: str, setting: tuple[tuple[str, Any], ...]) -> str:
    return f"{agent}[{', '.join(f'{key}={value}' for key, value in setting)}]" if setting else agent


@dataclasses.dataclass(frozen=True)
class Study:
    """Agents x seeds; the scores and the paired agent differences its summary reports (module docstring)."""

    agents: Mapping[str, str]
    seeds: tuple[int, ...]
    scores: tuple[Score, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()
    curve: str = metric_keys.RETURN  # the metric whose learning curves the summary draws, against env steps
    # A grid axis of hyperparameters the agents' recipes declare (--set): every combination, for every agent.
    hyperparameters: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    statistic: str = "mean"  # what heads the summary's table; one of statistics.STATISTICS

    def __post_init__(self):
        object.__setattr__(self, "agents", dict(self.agents))
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "scores", tuple(self.scores))
        object.__setattr__(self, "pairs", tuple(tuple(pair) for pair in self.pairs))
        object.__setattr__(
            self, "hyperparameters", {key: tuple(values) for key, values in self.hyperparameters.items()}
        )
        for key, values in self.hyperparameters.items():
            if "/" not in key or not values or len(set(map(repr, values))) != len(values):
                raise ValueError(
                    f"hyperparameter {key!r}: a <namespace>/<field> hyperparameter with distinct values, got {values!r}"
                )
        if self.statistic not in STATISTICS:
            raise ValueError(f"statistic {self.statistic!r} must be one of {', '.join(STATISTICS)}")
        if not self.agents:
            raise ValueError("a study needs at least one agent: agents={'name': 'dotted.recipe.module'}")
        for name in self.agents:
            if not _AGENT_NAME.fullmatch(name):
                raise ValueError(f"agent name {name!r} must be 1-41 letters, digits and '_' (it is part of run ids)")
        if not self.seeds or any(
            isinstance(seed, bool) or not isinstance(seed, int) or seed < 0 for seed in self.seeds
        ):
            raise ValueError(f"seeds must be non-negative integers, got {self.seeds!r}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds {self.seeds!r} repeat a seed: each seed once")
        names = [score.name for score in self.scores]
        if len(set(names)) != len(names):
            raise ValueError(f"score names repeat: {names}")
        for a, b in self.pairs:
            unknown = [agent for agent in (a, b) if agent not in self.agents]
            if unknown or a == b:
                raise ValueError(f"pair ({a!r}, {b!r}) must name two different agents of {sorted(self.agents)}")

    def settings(self) -> list[tuple[tuple[str, Any], ...]]:
        """Every combination of the hyperparameters axis, each a setting (one empty setting without one)."""
        keys = list(self.hyperparameters)
        return [tuple(zip(keys, values)) for values in itertools.product(*(self.hyperparameters[key] for key in keys))]

    def members(self) -> tuple[Member, ...]:
        """Seed by seed, then agent by agent (in declaration order), setting by setting: the order members run
        in, so that a study stopped early (or still running) holds every agent at the same seeds, paired."""
        return tuple(
            Member(agent, seed, setting) for seed in self.seeds for agent in self.agents for setting in self.settings()
        )

    def variants(self) -> dict[str, str]:
        """{variant name: agent}, in member order."""
        return {variant_name(agent, setting): agent for agent in self.agents for setting in self.settings()}

    def variant_pairs(self) -> list[tuple[str, str]]:
        """The declared pairs at each setting: (a[setting], b[setting])."""
        return [
            (variant_name(a, setting), variant_name(b, setting)) for a, b in self.pairs for setting in self.settings()
        ]

    def describe(self) -> dict:
        """The grid, as the study record keeps it."""
        return {
            "agents": dict(self.agents),
            "seeds": list(self.seeds),
            "scores": {score.name: score.path for score in self.scores},
            "pairs": [list(pair) for pair in self.pairs],
            "curve": self.curve,
            "hyperparameters": {key: list(values) for key, values in self.hyperparameters.items()},
            "statistic": self.statistic,
        }

    @classmethod
    def from_description(cls, grid: Mapping[str, Any]) -> Study:
        """The study back from its record's grid (`describe`)."""
        return cls(
            agents=grid["agents"],
            seeds=tuple(grid["seeds"]),
            scores=tuple(Score(name, path) for name, path in grid["scores"].items()),
            pairs=tuple(tuple(pair) for pair in grid["pairs"]),
            curve=grid["curve"],
            # "settings": the key of records written before the axis was named hyperparameters
            hyperparameters=grid.get("hyperparameters") or grid.get("settings") or {},
            statistic=grid.get("statistic", "mean"),
        )  # records that predate the choice: the mean
