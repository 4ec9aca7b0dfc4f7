"""Which samples a probe saw: every probe report records its sampling distribution.

    from rl.analysis.probes import SamplingDistribution

    uniform = SamplingDistribution.uniform_contexts(
        process="mess3(x=0.05,a=0.85)", num_tokens=3, max_length=10, group_prefix_length=4)
    rollouts = SamplingDistribution.process_rollouts(
        env="controlled_mess3", policy="run 20261201T0000Z-ab12 checkpoint 7", num_episodes=512,
        max_steps=64, seed_stream="probe/rollouts", action_sampling="stochastic")

Raw MSE depends on how spread the targets are, and that depends on the distribution: on Mess3 the
mean-belief baseline is 0.109 over all distinct contexts up to length 10 but 0.161 over contexts
weighted by how often the process produces them. `require_comparable` therefore refuses to put
raw metrics of different distributions side by side; `r2` (= 1 - mse / target_variance) is
normalised by each distribution's own variance and may be compared.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

UNIFORM_CONTEXTS = "uniform_contexts"
PROCESS_ROLLOUTS = "process_rollouts"
KINDS = (UNIFORM_CONTEXTS, PROCESS_ROLLOUTS)

# Metrics normalised by the target variance of their own distribution: comparable across
# distributions. Every other metric is in target units squared and is not.
NORMALISED_METRICS = frozenset({"r2", "train_r2", "baseline_r2", "shuffle_r2", "null_p_value"})


class DistributionMismatchError(ValueError):
    """Raw metrics of probes on different sampling distributions were put side by side."""


@dataclasses.dataclass(frozen=True)
class SamplingDistribution:
    """The population a probe's samples were drawn from (`kind`, `source`, and its parameters)."""

    kind: str
    source: str
    parameters: Mapping[str, Any]

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown sampling distribution kind {self.kind!r}; use one of {KINDS}")
        if not self.source:
            raise ValueError("a sampling distribution needs a source (the process or environment name)")
        json.dumps(dict(self.parameters))  # parameters must survive the JSON report

    @classmethod
    def uniform_contexts(
        cls, *, process: str, num_tokens: int, max_length: int, group_prefix_length: int, min_length: int = 1
    ) -> SamplingDistribution:
        """Every distinct token context of length min_length..max_length once (see rl.analysis.token_contexts)."""
        return cls(
            UNIFORM_CONTEXTS,
            process,
            {
                "num_tokens": num_tokens,
                "min_length": min_length,
                "max_length": max_length,
                "group_prefix_length": group_prefix_length,
            },
        )

    @classmethod
    def process_rollouts(
        cls, *, env: str, policy: str, num_episodes: int, max_steps: int, seed_stream: str, action_sampling: str
    ) -> SamplingDistribution:
        """Every step of episodes the policy played in the environment (weighted as they occur)."""
        return cls(
            PROCESS_ROLLOUTS,
            env,
            {
                "policy": policy,
                "num_episodes": num_episodes,
                "max_steps": max_steps,
                "seed_stream": seed_stream,
                "action_sampling": action_sampling,
            },
        )

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.source, "parameters": dict(self.parameters)}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> SamplingDistribution:
        return cls(record["kind"], record["source"], dict(record["parameters"]))

    def describe(self) -> str:
        parameters = ", ".join(f"{key}={value}" for key, value in sorted(self.parameters.items()))
        return f"{self.kind} of {self.source} ({parameters})"


def require_comparable(distributions: Sequence[SamplingDistribution], metric: str) -> None:
    """Raises DistributionMismatchError if `metric` is raw and the distributions differ."""
    if metric in NORMALISED_METRICS:
        return
    distinct = {json.dumps(d.as_dict(), sort_keys=True): d for d in distributions}
    if len(distinct) > 1:
        described = "; ".join(d.describe() for d in distinct.values())
        raise DistributionMismatchError(
            f"refusing to compare raw {metric!r} across {len(distinct)} sampling distributions ({described}): "
            "raw MSE scales with each distribution's target variance. Compare 'r2' (1 - mse/target_variance) "
            "instead, or probe every checkpoint on the same distribution (e.g. uniform contexts)."
        )
