"""PPO plus auxiliary prediction losses: NextTokenAuxLoss and StateAuxLoss, and Learners using them.

    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from rl.learners import NextTokenAuxPPOLearner
    from rl.learners.models import NextTokenAuxTransformerModel

    config = (
        PPOConfig()
        .environment(MY_ENV)                # its step infos carry info["token"]
        .rl_module(rl_module_spec=RLModuleSpec(
            module_class=NextTokenAuxTransformerModel,
            model_config={"vf_share_layers": True, "next_token_aux": {"num_tokens": 3}},
        ))
        .learners(learner_class=NextTokenAuxPPOLearner,
                  learner_config_dict={"next_token_aux/loss_coefficient": 0.5})
    )

    # Both terms: stack the loss classes (and the head mixins on the module).
    class BothAuxPPOLearner(NextTokenAuxLoss, StateAuxLoss, ActorCriticPPOTorchLearner):
        pass

Targets come from the env's infos, added to the batch by an `AddInfoColumn` learner connector
piece (inserted before the chunking piece, so the Transformer's (B, T) chunks pad them like the
actions). For batch step t (observation t, action t):
- next_token_aux: `info["token"]` returned by step t (the token that appears in observation
  t + 1), predicted from the embedding and the one-hot of action t;
- state_aux: `info["state"]` that came with observation t (from reset or step t - 1).
Both losses are the masked cross-entropy (`Columns.LOSS_MASK`); metrics, per module:
`<ns>/loss` and `<ns>/accuracy`. With `<ns>/loss_coefficient` 0 nothing is computed, logged or
added to the batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import override

from rl.learners.connectors import AddInfoColumn, insert_before_chunking
from rl.learners.models.aux_heads import NextTokenAuxHead, StateAuxHead
from rl.learners.ppo.learner import ActorCriticPPOTorchLearner
from rl.losses import LossTermMixin, LossTermOptions, categorical_accuracy, categorical_prediction_loss

NEXT_TOKEN_TARGETS = "next_token_aux_targets"
STATE_TARGETS = "state_aux_targets"


def prediction_term(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
    """The cross-entropy term and its accuracy metric."""
    return categorical_prediction_loss(logits, targets, mask), {"accuracy": categorical_accuracy(logits, targets, mask)}


class AuxPredictionLoss(LossTermMixin):
    """A cross-entropy term whose targets are one key of the env's infos; subclasses name the head and the key."""

    loss_options_class = LossTermOptions
    head_mixin: ClassVar[type]
    info_key: ClassVar[str]
    info_offset: ClassVar[int]  # 0: the info with observation t; 1: the info after action t
    target_column: ClassVar[str]

    @override(Learner)
    def build(self) -> None:
        super().build()
        # This method is in the MRO once however many prediction terms are stacked: set up each of them.
        for term in type(self).__mro__:
            if issubclass(term, AuxPredictionLoss) and "loss_namespace" in term.__dict__:
                term.set_up_term(self)

    @classmethod
    def batch_info_keys(cls) -> frozenset[str] | None:
        """Each stacked prediction term's `info_key` and the Learner's others (None where the Learner names none:
        it may read any)."""
        read = getattr(super(), "batch_info_keys", None)
        others = None if read is None else read()
        if others is None:
            return None
        terms = [term for term in cls.__mro__ if issubclass(term, AuxPredictionLoss) and "info_key" in term.__dict__]
        return others | {term.info_key for term in terms}

    @classmethod
    def set_up_term(cls, learner: Any) -> None:
        """Checks every module has the head and valid options; adds the target column where the term is on."""
        mixin = cls.head_mixin.__name__
        coefficients = []
        for module_id in learner.module.keys():
            module = learner.module[module_id].unwrapped()
            if not isinstance(module, cls.head_mixin):
                raise TypeError(
                    f"{type(learner).__name__}'s '{cls.loss_namespace}' term needs modules with {mixin}, but module "
                    f"{module_id!r} is {type(module).__name__}; use e.g. "
                    f"`class Model({mixin}, {type(module).__name__}): pass`."
                )
            coefficients.append(cls.read_loss_options(learner.config.get_config_for_module(module_id)).loss_coefficient)
        if learner._learner_connector is not None and any(coefficients):
            target_piece = AddInfoColumn(
                info_key=cls.info_key,
                offset=cls.info_offset,
                column=cls.target_column,
                info_source=f"env {learner.config.env!r}",
            )
            insert_before_chunking(learner._learner_connector, target_piece)


class NextTokenAuxLoss(AuxPredictionLoss):
    """Cross-entropy of NextTokenAuxHead against the token each step emits; options under `next_token_aux/`."""

    loss_namespace = NextTokenAuxHead.model_config_section
    head_mixin = NextTokenAuxHead
    info_key = "token"
    info_offset = 1
    target_column = NEXT_TOKEN_TARGETS

    def compute_loss_term(
        self, *, module_id: str, config: Any, batch: Any, fwd_out: Any, options: LossTermOptions
    ) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
        module = self.module[module_id].unwrapped()
        logits = module.next_token_logits_from_embeddings(fwd_out[Columns.EMBEDDINGS], batch[Columns.ACTIONS])
        return prediction_term(logits, batch[NEXT_TOKEN_TARGETS], batch.get(Columns.LOSS_MASK))


class StateAuxLoss(AuxPredictionLoss):
    """Cross-entropy of StateAuxHead against the current hidden state; options under `state_aux/`."""

    loss_namespace = StateAuxHead.model_config_section
    head_mixin = StateAuxHead
    info_key = "state"
    info_offset = 0
    target_column = STATE_TARGETS

    def compute_loss_term(
        self, *, module_id: str, config: Any, batch: Any, fwd_out: Any, options: LossTermOptions
    ) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
        module = self.module[module_id].unwrapped()
        logits = module.state_logits_from_embeddings(fwd_out[Columns.EMBEDDINGS])
        return prediction_term(logits, batch[STATE_TARGETS], batch.get(Columns.LOSS_MASK))


class NextTokenAuxPPOLearner(NextTokenAuxLoss, ActorCriticPPOTorchLearner):
    """ActorCriticPPOTorchLearner plus the next-token cross-entropy (`next_token_aux/loss_coefficient`)."""


class StateAuxPPOLearner(StateAuxLoss, ActorCriticPPOTorchLearner):
    """ActorCriticPPOTorchLearner plus the hidden-state cross-entropy (`state_aux/loss_coefficient`)."""
