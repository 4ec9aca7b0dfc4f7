"""What an experiment passes to rl.analysis: rl/analysis never imports an environment.

An experiment implements one or both protocols (plain classes; no base class needed):

    class Mess3Contexts:                      # uniform-context probing
        name = "mess3(x=0.05,a=0.85)"
        num_tokens = 3
        target_name = "belief"
        def observations(self, contexts):     # (B, m) tokens -> (B, m, *obs_shape) module inputs
            return np.eye(3, dtype=np.float32)[contexts]
        def targets(self, contexts):          # (B, m) tokens -> (B, 3) belief after the last token
            ...

    class ControlledMess3Env:                 # process-weighted rollouts
        name = "controlled_mess3(x=0.05,a=0.85)"
        def make_env(self):
            return ControlledMess3()          # a gymnasium.Env
        def diagnostics(self, env, info):     # called after reset and after every step
            return {"belief": env.unwrapped.belief, "hidden_state": np.array(env.unwrapped.state)}

and, for the probe command, a `probe_plan(smoke)` function in the recipe module that returns the
`ProbePlan` a run of that budget probes with (in-run and later): which distributions, with which
adapters and sample sizes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol

import gymnasium
import numpy as np

from rl.analysis.probes import ProbeOptions


class ContextAdapter(Protocol):
    """Token contexts -> module inputs and probe targets (for the uniform-context distribution)."""

    name: str  # recorded as the distribution's source, e.g. "mess3(x=0.05,a=0.85)"
    num_tokens: int
    target_name: str  # e.g. "belief"

    def observations(self, contexts: np.ndarray) -> np.ndarray:
        """(batch, length) int tokens -> (batch, length, *obs_shape): what the module reads per step."""

    def targets(self, contexts: np.ndarray) -> np.ndarray:
        """(batch, length) int tokens -> (batch, target_dim): the target after each whole context."""


class EnvAdapter(Protocol):
    """An environment factory plus the hidden quantities a probe targets (process-weighted rollouts)."""

    name: str  # recorded as the distribution's source

    def make_env(self) -> gymnasium.Env:
        """A fresh environment; rollouts seed it through reset(seed=...)."""

    def diagnostics(self, env: gymnasium.Env, info: Mapping) -> Mapping[str, np.ndarray]:
        """Hidden quantities after reset and after each step, e.g. {"belief": ..., "hidden_state": ...}."""


@dataclasses.dataclass(frozen=True)
class ContextProbing:
    """Probe on every token context of length 1..max_length (the uniform-context distribution)."""

    adapter: ContextAdapter
    max_length: int
    group_prefix_length: int  # contexts sharing this many first tokens stay on one side of the split
    batch_size: int = 2048  # contexts per forward pass (memory, not science)


@dataclasses.dataclass(frozen=True)
class RolloutProbing:
    """Probe on the steps of episodes the checkpoint's own policy plays (process-weighted)."""

    adapter: EnvAdapter
    target: str  # the diagnostics key to probe, e.g. "belief"
    num_episodes: int
    max_steps: int
    stochastic: bool = True  # sample actions as in training; False: greedy
    batch_size: int = 64  # environments stepped in lockstep (memory, not science)


@dataclasses.dataclass(frozen=True)
class ProbePlan:
    """What an experiment's `probe_plan(smoke)` returns for the probe command (at least one distribution).

    def probe_plan(smoke: bool) -> ProbePlan:   # in the recipe module, beside run(context)
        return ProbePlan(contexts=ContextProbing(Mess3Contexts(), max_length=10, group_prefix_length=4),
                         rollouts=RolloutProbing(ControlledMess3Env(), target="belief",
                                                 num_episodes=256, max_steps=64))
    """

    contexts: ContextProbing | None = None
    rollouts: RolloutProbing | None = None
    options: ProbeOptions = ProbeOptions()

    def __post_init__(self):
        if self.contexts is None and self.rollouts is None:
            raise ValueError("a ProbePlan needs ContextProbing, RolloutProbing, or both")
