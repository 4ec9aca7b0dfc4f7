"""Auxiliary prediction heads that shape the encoder: NextTokenAuxHead and StateAuxHead.

    from rl.learners.models import NextTokenAuxHead, StateAuxHead, TransformerModel

    class NextTokenAndStateTransformer(NextTokenAuxHead, StateAuxHead, TransformerModel):
        pass                       # mixins before the model class; they stack in any order

    model_config = {
        "vf_share_layers": True,                  # one encoder (the heads read Columns.EMBEDDINGS)
        "next_token_aux": {"num_tokens": 3},      # NextTokenAuxConfig
        "state_aux": {"num_states": 3},           # StateAuxConfig
    }

- NextTokenAuxHead (`next_token_aux_head`): logits of the token emitted by this step's
  transition. In a controlled env the action taken at this step tilts that transition, so the
  head reads the embedding concatenated with the one-hot of the action (Discrete actions only).
- StateAuxHead (`state_aux_head`): logits of the current hidden state, from the embedding
  alone (a diagnostic: with a positive coefficient it also trains the encoder on privileged
  information).

Both are linear maps over the undetached embeddings, so their losses reach the encoder, and
both are training-only: EnvRunners drop them. Train them with NextTokenAuxPPOLearner /
StateAuxPPOLearner (rl/learners/aux_prediction/learner.py), which read the targets from the env's
infos.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

import gymnasium as gym
import torch
from torch import nn

from rl.learners.models.config import parse_config, require_positive_int
from rl.learners.models.heads import POLICY_GAIN, init_linear
from rl.learners.models.mlp import MLPModel
from rl.learners.models.transformer import TransformerModel

NEXT_TOKEN_AUX_HEAD = "next_token_aux_head"
STATE_AUX_HEAD = "state_aux_head"

ConfigT = TypeVar("ConfigT")


@dataclasses.dataclass(frozen=True)
class NextTokenAuxConfig:
    """`model_config["next_token_aux"]`.

    Attributes:
        num_tokens: size of the token alphabet (required: it is the env's, not a tuning choice).
    """

    num_tokens: int

    def __post_init__(self) -> None:
        require_positive_int("num_tokens", self.num_tokens)


@dataclasses.dataclass(frozen=True)
class StateAuxConfig:
    """`model_config["state_aux"]`.

    Attributes:
        num_states: number of hidden states (required: it is the env's).
    """

    num_states: int

    def __post_init__(self) -> None:
        require_positive_int("num_states", self.num_states)


def aux_head_config(module: Any, section: str, config_class: type[ConfigT]) -> ConfigT:
    """Validates what every auxiliary head needs of `module` and returns its settings from `model_config[section]`."""
    where = f"{type(module).__name__}'s model_config['{section}']"
    values = module.model_config.get(section)
    required = [field.name for field in dataclasses.fields(config_class)]
    if not isinstance(values, Mapping) or any(name not in values for name in required):
        raise ValueError(
            f"{where} must be a dict with {required}, got {values!r}; "
            f"e.g. model_config={{'{section}': {{{', '.join(repr(name) + ': ...' for name in required)}}}}}."
        )
    if not module.module_config.vf_share_layers:
        raise ValueError(
            f"{type(module).__name__}'s auxiliary head '{section}' reads the shared encoder's embeddings "
            "(Columns.EMBEDDINGS, the critic's input): set model_config['vf_share_layers'] = True "
            "(PPO writes False unless you set it)."
        )
    return parse_config(config_class, values, where=where)


class NextTokenAuxHead:
    """Predicts the token this step emits from the embedding and the action taken; put it before the model class."""

    model_config_section = "next_token_aux"

    def setup(self) -> None:
        super().setup()  # type: ignore[misc]
        self.next_token_aux_config = aux_head_config(self, NextTokenAuxHead.model_config_section, NextTokenAuxConfig)
        if not isinstance(self.action_space, gym.spaces.Discrete):  # type: ignore[attr-defined]
            raise ValueError(
                f"NextTokenAuxHead reads the one-hot of the action taken, so it needs a Discrete action space; "
                f"{type(self).__name__} has {self.action_space}. Drop the mixin or discretise the actions."  # type: ignore[attr-defined]
            )
        self.num_actions = int(self.action_space.n)  # type: ignore[attr-defined]
        # Small initial logits: the loss starts near log(num_tokens), so early gradients into the encoder are mild.
        self.next_token_aux_head = init_linear(
            nn.Linear(self.embedding_dim + self.num_actions, self.next_token_aux_config.num_tokens),  # type: ignore[attr-defined]
            POLICY_GAIN,
        )

    def next_token_logits_from_embeddings(self, embeddings: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Logits (..., num_tokens) of the token emitted after taking `actions` (...) at `embeddings` (..., d)."""
        one_hot = nn.functional.one_hot(actions.long(), self.num_actions).to(embeddings.dtype)
        return self.next_token_aux_head(torch.cat([embeddings, one_hot], dim=-1))

    def get_non_inference_attributes(self) -> list[str]:
        return super().get_non_inference_attributes() + [NEXT_TOKEN_AUX_HEAD]  # type: ignore[misc]


class StateAuxHead:
    """Predicts the current hidden state from the embedding; put it before the model class."""

    model_config_section = "state_aux"

    def setup(self) -> None:
        super().setup()  # type: ignore[misc]
        self.state_aux_config = aux_head_config(self, StateAuxHead.model_config_section, StateAuxConfig)
        self.state_aux_head = init_linear(
            nn.Linear(self.embedding_dim, self.state_aux_config.num_states),
            POLICY_GAIN,  # type: ignore[attr-defined]
        )

    def state_logits_from_embeddings(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Logits (..., num_states) of the current hidden state."""
        return self.state_aux_head(embeddings)

    def get_non_inference_attributes(self) -> list[str]:
        return super().get_non_inference_attributes() + [STATE_AUX_HEAD]  # type: ignore[misc]


class NextTokenAuxTransformerModel(NextTokenAuxHead, TransformerModel):
    """A TransformerModel with a next-token head (model_config['next_token_aux'])."""


class NextTokenAuxMLPModel(NextTokenAuxHead, MLPModel):
    """An MLPModel with a next-token head (model_config['next_token_aux'])."""


class StateAuxTransformerModel(StateAuxHead, TransformerModel):
    """A TransformerModel with a hidden-state head (model_config['state_aux'])."""
