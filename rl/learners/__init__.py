"""rl.learners: RLlib Learners and RLModules of the library.

    from rl.learners import ActorCriticPPOTorchLearner, IQNPPOTorchLearner, QRPPOTorchLearner
    from rl.learners import PPGConfig, PPGTorchLearner
    from rl.learners import PipelinedPPOConfig        # PPO sampling the next batch while it updates
    from rl.learners import NextTokenAuxPPOLearner, StateAuxPPOLearner, NextTokenAuxLoss, StateAuxLoss
    from rl.learners.models import MLPModel, TransformerModel
    from rl.learners.quantile_critic import IQNValueMixin, QRValueMixin
    from rl.learners.ppg import PPGTransformerModel
    from rl.learners.models import NextTokenAuxHead, StateAuxHead

Exports load lazily: `import rl.learners` does not import RLlib until a name is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ActorCriticPPOTorchLearner": "rl.learners.ppo.learner",
    "IQNPPOTorchLearner": "rl.learners.quantile_critic.learner",
    "NextTokenAuxLoss": "rl.learners.aux_prediction",
    "NextTokenAuxPPOLearner": "rl.learners.aux_prediction",
    "PPG": "rl.learners.ppg.config",
    "PPGConfig": "rl.learners.ppg.config",
    "PPGTorchLearner": "rl.learners.ppg.learner",
    "PipelinedPPO": "rl.learners.pipelined",
    "PipelinedPPOConfig": "rl.learners.pipelined",
    "QRPPOTorchLearner": "rl.learners.quantile_critic.learner",
    "StateAuxLoss": "rl.learners.aux_prediction",
    "StateAuxPPOLearner": "rl.learners.aux_prediction",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rl.learners' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
