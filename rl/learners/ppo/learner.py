"""ActorCriticPPOTorchLearner: RLlib's PPOTorchLearner plus a build-time check of our modules.

    from rl.learners import ActorCriticPPOTorchLearner

    config.learners(learner_class=ActorCriticPPOTorchLearner)

When built, it asks every ActorCriticModule whether the algorithm config can train
it (e.g. TransformerModel needs `minibatch_size` to be a multiple of
`max_seq_len`), so a bad combination fails with a clear error before training.
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import override

from rl.learners.models.base import ActorCriticModule


class ActorCriticPPOTorchLearner(PPOTorchLearner):
    """PPOTorchLearner that validates its ActorCriticModules against the algorithm config."""

    @override(Learner)
    def build(self) -> None:
        super().build()
        for module_id in self.module.keys():
            module = self.module[module_id].unwrapped()
            if isinstance(module, ActorCriticModule):
                module.check_algorithm_config(self.config.get_config_for_module(module_id))
