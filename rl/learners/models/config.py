"""Validated configurations of the actor-critic RLModules, read from RLlib's `model_config` dict.

    RLModuleSpec(
        module_class=TransformerModel,
        model_config={"d_model": 64, "n_heads": 4, "max_seq_len": 16, "vf_share_layers": True},
    )

Each module class reads the fields of its config class from the top level of
`model_config`; value-head mixins read their own section (e.g. `"iqn_value"`).
Unknown keys and bad values raise ValueError naming the key and the fix; a broken rule between
fields raises ConfigError, whose `fixes` a recipe can name as its own `--set` keys:

    try:
        TransformerConfig(d_model=32, n_heads=5)
    except ConfigError as error:
        error.problem     # "d_model (32) must be divisible by n_heads (5)"
        error.fixes       # {"d_model": 30, "n_heads": 4}: each alone would pass
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

ConfigT = TypeVar("ConfigT")

ACTIVATIONS = ("tanh", "relu")


class ConfigError(ValueError):
    """A configuration that breaks a rule between fields; `fixes` maps a field to a value that alone would pass."""

    def __init__(self, problem: str, fixes: Mapping[str, Any]):
        self.problem = problem
        self.fixes = dict(fixes)
        super().__init__(
            f"{problem}; choose e.g. {' or '.join(f'{name}={value!r}' for name, value in self.fixes.items())}."
        )


def require_positive_int(name: str, value: Any) -> None:
    """Raises ValueError unless `value` is an int >= 1 (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")


def require_bool(name: str, value: Any) -> None:
    """Raises ValueError unless `value` is a bool."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}.")


def parse_config(
    config_class: type[ConfigT],
    values: Mapping[str, Any],
    *,
    where: str,
    sections: Collection[str] = (),
) -> ConfigT:
    """Builds `config_class` from `values`, rejecting keys that are neither fields nor `sections`.

    Example:
        parse_config(MLPConfig, {"hidden_sizes": [32]}, where="model_config")
    """
    if not isinstance(values, Mapping):
        raise ValueError(f"{where} must be a dict, got {type(values).__name__}.")
    fields = [field.name for field in dataclasses.fields(config_class)]
    unknown = sorted(set(values) - set(fields) - set(sections))
    if unknown:
        raise ValueError(
            f"{where} has unknown key(s) {unknown}: {config_class.__name__} reads {fields}"
            + (f" and the section(s) {sorted(sections)}" if sections else "")
            + "; remove or rename them."
        )
    try:
        return config_class(**{name: values[name] for name in fields if name in values})
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from error


@dataclasses.dataclass(frozen=True)
class ActorCriticConfig:
    """Fields every actor-critic module reads from `model_config`.

    Attributes:
        vf_share_layers: True: the policy and value heads read one encoder (PPG's detach
            design needs this). False: the value head gets its own encoder of the same
            architecture, RLlib's PPO default (PPO writes False into `model_config`
            unless you set it).
    """

    vf_share_layers: bool = False

    def __post_init__(self) -> None:
        require_bool("vf_share_layers", self.vf_share_layers)


@dataclasses.dataclass(frozen=True)
class MLPConfig(ActorCriticConfig):
    """MLPModel's encoder.

    Attributes:
        hidden_sizes: widths of the hidden layers; the last one is the embedding size.
        activation: "tanh" or "relu".
    """

    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.hidden_sizes, (list, tuple)) or not self.hidden_sizes:
            raise ValueError(f"hidden_sizes must be a non-empty list of positive ints, got {self.hidden_sizes!r}.")
        for size in self.hidden_sizes:
            require_positive_int("every entry of hidden_sizes", size)
        object.__setattr__(self, "hidden_sizes", tuple(self.hidden_sizes))
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}.")


@dataclasses.dataclass(frozen=True)
class TransformerConfig(ActorCriticConfig):
    """TransformerModel's causal, sliding-window transformer encoder.

    Attributes:
        d_model: width of the residual stream (the embedding size); a multiple of n_heads.
        n_heads: attention heads per layer.
        n_layers: transformer blocks.
        feedforward_dim: hidden width of each block's MLP.
        memory_len: how many earlier steps each step attends to (besides itself). The
            rollout state caches this many keys and values per layer, so a rollout step
            costs the same at any episode position.
        max_seq_len: length of the chunks RLlib cuts episodes into for training (RLlib's
            own `model_config["max_seq_len"]` key). The training minibatch size must be a
            multiple of it.
    """

    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    feedforward_dim: int = 256
    memory_len: int = 32
    max_seq_len: int = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("d_model", "n_heads", "n_layers", "feedforward_dim", "memory_len", "max_seq_len"):
            require_positive_int(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})",
                fixes={
                    "d_model": self.n_heads * max(1, round(self.d_model / self.n_heads)),
                    "n_heads": max(h for h in range(1, self.n_heads) if self.d_model % h == 0),
                },
            )
