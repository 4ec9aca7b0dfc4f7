"""ActorCriticPPOTorchLearner: RLlib's PPOTorchLearner plus a build-time check of our modules.

    from rl.learners import ActorCriticPPOTorchLearner

    config.learners(learner_class=ActorCriticPPOTorchLearner)

When built, it asks every ActorCriticModule whether the algorithm config can train
it (e.g. TransformerModel needs `minibatch_size` to be a multiple of
`max_seq_len`), so a bad combination fails with a clear error before training.
For speed, its SGD steps use fused Adam and one finite check of all gradients
(`FusedGradientStepMixin`), its learner connector cuts episodes into chunks with
`rl.learners.connectors` and runs without autograd. The IQN, QR and PPG Learners
derive from it.
"""

from __future__ import annotations

from typing import Any

import torch

from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import override

from rl.learners.connectors import use_fast_chunking
from rl.learners.gradient_steps import FusedGradientStepMixin
from rl.learners.models.base import ActorCriticModule


class ActorCriticPPOTorchLearner(FusedGradientStepMixin, PPOTorchLearner):
    """PPOTorchLearner that validates its ActorCriticModules against the algorithm config."""

    @override(Learner)
    def build(self) -> None:
        super().build()
        if self._learner_connector is not None:
            use_fast_chunking(self._learner_connector)
        for module_id in self.module.keys():
            module = self.module[module_id].unwrapped()
            if isinstance(module, ActorCriticModule):
                module.check_algorithm_config(self.config.get_config_for_module(module_id))

    @override(Learner)
    def _make_batch_if_necessary(self, training_data: Any) -> Any:
        # The connector only prepares data; its value predictions (GAE) need no autograd graph.
        with torch.no_grad():
            return super()._make_batch_if_necessary(training_data)
