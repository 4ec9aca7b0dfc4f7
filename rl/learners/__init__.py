"""rl.learners: RLlib Learners and RLModules of the library.

    from rl.learners import ActorCriticPPOTorchLearner, IQNPPOTorchLearner, QRPPOTorchLearner
    from rl.learners import PPGConfig, PPGTorchLearner
    from rl.learners import PipelinedPPOConfig        # PPO sampling the next batch while it updates
    from rl.learners import NextTokenAuxPPOLearner, StateAuxPPOLearner, NextTokenAuxLoss, StateAuxLoss
    from rl.learners.models import MLPModel, TransformerModel
    from rl.learners.quantile_critic import IQNValueMixin, QRValueMixin
    from rl.learners.ppg import PPGTransformerModel
    from rl.learners.models import NextTokenAuxHead, StateAuxHead

Exports load when first used (the measured reason is beside `_EXPORTS`); type checkers and editors
follow them through the `TYPE_CHECKING` imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Every export loads RLlib and torch: 11.9 s measured (`python -c "from rl.learners import *"`, 2026-12-06,
# 2 cores under load 14), against 0.07 s for the face itself. Python runs this file before any
# `rl.learners.<module>`, so an eager face would charge that to every import of one module (a loss
# helper, a connector, a test); the names load when first used.
_EXPORTS = {
    "ActorCriticPPOTorchLearner": "rl.learners.ppo.learner",
    "IQNPPOTorchLearner": "rl.learners.quantile_critic.learner",
    "NextTokenAuxLoss": "rl.learners.aux_prediction",
    "NextTokenAuxPPOLearner": "rl.learners.aux_prediction",
    "NextTokenModel": "rl.learners.next_token",
    "NextTokenTraining": "rl.learners.next_token",
    "PPG": "rl.learners.ppg.config",
    "PPGConfig": "rl.learners.ppg.config",
    "PPGTorchLearner": "rl.learners.ppg.learner",
    "PipelinedPPO": "rl.learners.pipelined",
    "PipelinedPPOConfig": "rl.learners.pipelined",
    "QRPPOTorchLearner": "rl.learners.quantile_critic.learner",
    "StateAuxLoss": "rl.learners.aux_prediction",
    "StateAuxPPOLearner": "rl.learners.aux_prediction",
    "train_next_token": "rl.learners.next_token",
}

if TYPE_CHECKING:  # what editors, type checkers and call walkers follow; never run
    from rl.learners.aux_prediction import NextTokenAuxLoss, NextTokenAuxPPOLearner, StateAuxLoss, StateAuxPPOLearner
    from rl.learners.next_token import NextTokenModel, NextTokenTraining, train_next_token
    from rl.learners.pipelined import PipelinedPPO, PipelinedPPOConfig
    from rl.learners.ppg.config import PPG, PPGConfig
    from rl.learners.ppg.learner import PPGTorchLearner
    from rl.learners.ppo.learner import ActorCriticPPOTorchLearner
    from rl.learners.quantile_critic.learner import IQNPPOTorchLearner, QRPPOTorchLearner

__all__ = [  # the names of _EXPORTS, literal so that tools read them
    "PPG",
    "ActorCriticPPOTorchLearner",
    "IQNPPOTorchLearner",
    "NextTokenAuxLoss",
    "NextTokenAuxPPOLearner",
    "NextTokenModel",
    "NextTokenTraining",
    "PPGConfig",
    "PPGTorchLearner",
    "PipelinedPPO",
    "PipelinedPPOConfig",
    "QRPPOTorchLearner",
    "StateAuxLoss",
    "StateAuxPPOLearner",
    "train_next_token",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rl.learners' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
