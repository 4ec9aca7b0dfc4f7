"""Phasic Policy Gradient, one feature folder in RLlib's layout (user guide: docs/ppg.md).

    from rl.learners.ppg import PPGConfig, PPGTransformerModel

    config = PPGConfig().environment("CartPole-v1").training(policy_iterations_per_aux=32)

- `config.py`: PPGConfig and the PPG algorithm; `defaults.py`: defaults and validation;
- `learner.py`: PPGTorchLearner (policy phases as PPO, then the auxiliary phase);
- `module.py`: PPGAuxiliaryValueHead and the MLP/Transformer modules with it;
- `tests/`: the learner's mechanics (fast) and CartPole learning (slow).
"""

from rl.learners.ppg.config import PPG, PPGConfig
from rl.learners.ppg.defaults import PPG_DEFAULTS, validate_ppg_config
from rl.learners.ppg.learner import PPGTorchLearner
from rl.learners.ppg.module import PPGAuxiliaryValueHead, PPGMLPModel, PPGTransformerModel

__all__ = [
    "PPG",
    "PPG_DEFAULTS",
    "PPGAuxiliaryValueHead",
    "PPGConfig",
    "PPGMLPModel",
    "PPGTorchLearner",
    "PPGTransformerModel",
    "validate_ppg_config",
]
