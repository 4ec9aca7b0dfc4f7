"""PPO with a distributional critic: IQNPPOTorchLearner and QRPPOTorchLearner.

    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from rl.learners.models import TransformerModel
    from rl.learners.quantile_critic import IQNPPOTorchLearner, IQNValueMixin

    class IQNTransformerModel(IQNValueMixin, TransformerModel):
        pass

    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .rl_module(rl_module_spec=RLModuleSpec(
            module_class=IQNTransformerModel,
            model_config={"iqn_value": {"train_quantiles": 32, "value_quantiles": 64, "n_cosines": 64}},
        ))
        .training(vf_loss_coeff=0.0)     # the quantile loss replaces PPO's value loss
        .learners(
            learner_class=IQNPPOTorchLearner,
            learner_config_dict={"iqn_value/loss_coefficient": 0.5, "iqn_value/huber_kappa": 1.0},
        )
    )

The critic regresses the sampled on-policy lambda returns in the batch
(`value_targets`) with the quantile Huber loss, honouring `LOSS_MASK`. Metrics,
per module: `<ns>/loss`, `<ns>/quantile_spread` (mean over steps of the standard
deviation across predicted quantiles, about the predicted return std) and
`<ns>/crossing_fraction` (share of adjacent quantile pairs, ordered by tau, whose
values decrease). PPO's own `vf_loss` metrics still report the squared error of
the mean-quantile value, which has no weight in the loss.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import override

from rl.learners.ppo.learner import ActorCriticPPOTorchLearner
from rl.learners.quantile_critic.module import IQNValueMixin, QRValueMixin, QuantileValueMixin
from rl.losses import LossTermMixin, LossTermOptions, masked_mean, quantile_huber_loss, require_number


@dataclasses.dataclass(frozen=True)
class QuantileCriticOptions(LossTermOptions):
    """`learner_config_dict["<ns>/<field>"]` of a quantile critic.

    Attributes:
        loss_coefficient: weight of the quantile Huber loss (required).
        huber_kappa: Huber threshold in return units (> 0); 1.0 as in the papers.
    """

    huber_kappa: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_number("huber_kappa", self.huber_kappa, minimum=0.0, inclusive=False)


def crossing_fraction(quantiles: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
    """Per step, the share of tau-adjacent quantile pairs whose values decrease, (...)."""
    order = torch.argsort(taus.expand_as(quantiles), dim=-1)
    ordered = torch.gather(quantiles, -1, order)
    return (ordered.diff(dim=-1) < 0).to(quantiles.dtype).mean(dim=-1)


class QuantileCriticLoss(LossTermMixin):
    """Quantile Huber loss of the module's quantile head against the batch's lambda returns."""

    loss_options_class = QuantileCriticOptions
    value_mixin: ClassVar[type[QuantileValueMixin]]

    @override(Learner)
    def build(self) -> None:
        super().build()
        learner = type(self).__name__
        mixin = self.value_mixin.__name__
        for module_id in self.module.keys():
            config = self.config.get_config_for_module(module_id)
            module = self.module[module_id].unwrapped()
            if not isinstance(module, self.value_mixin):
                raise TypeError(
                    f"{learner} trains modules with {mixin}, but module {module_id!r} is "
                    f"{type(module).__name__}; use e.g. `class Model({mixin}, {type(module).__name__}): pass`."
                )
            if config.vf_loss_coeff != 0:
                raise ValueError(
                    f"{learner} trains the critic with '{self.loss_namespace}/loss_coefficient'; PPO's squared-error "
                    f"value loss must be off: set config.training(vf_loss_coeff=0.0) (got {config.vf_loss_coeff})."
                )
            if not config.use_critic:
                raise ValueError(f"{learner} needs a critic for GAE: set config.training(use_critic=True).")
            self.read_loss_options(config)

    def compute_loss_term(
        self, *, module_id: str, config: Any, batch: Any, fwd_out: Any, options: QuantileCriticOptions
    ) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
        module = self.module[module_id].unwrapped()
        quantiles, taus = module.training_value_quantiles(fwd_out[Columns.EMBEDDINGS])
        mask = batch.get(Columns.LOSS_MASK)
        loss = quantile_huber_loss(quantiles, taus, batch[Columns.VALUE_TARGETS], kappa=options.huber_kappa, mask=mask)
        with torch.no_grad():
            metrics = {
                "quantile_spread": masked_mean(quantiles.std(dim=-1, unbiased=False), mask),
                "crossing_fraction": masked_mean(crossing_fraction(quantiles, taus), mask),
            }
        return loss, metrics


class IQNPPOTorchLearner(QuantileCriticLoss, ActorCriticPPOTorchLearner):
    """PPO whose critic is an IQNValueMixin head; options under `iqn_value/`."""

    loss_namespace = IQNValueMixin.model_config_section
    value_mixin = IQNValueMixin


class QRPPOTorchLearner(QuantileCriticLoss, ActorCriticPPOTorchLearner):
    """PPO whose critic is a QRValueMixin head; options under `qr_value/`."""

    loss_namespace = QRValueMixin.model_config_section
    value_mixin = QRValueMixin
