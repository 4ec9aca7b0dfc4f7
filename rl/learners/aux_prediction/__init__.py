"""Auxiliary prediction losses for PPO, one feature folder in RLlib's layout (heads: `rl.learners.models.aux_heads`).

    from rl.learners.aux_prediction import NextTokenAuxPPOLearner, StateAuxPPOLearner

- `learner.py`: NextTokenAuxLoss and StateAuxLoss (loss terms on `rl.losses`' categorical
  prediction loss, targets from the env's infos) and the PPO Learners using them;
- `tests/`: shapes, target alignment (flat and chunked), updates, validation.
"""

from rl.learners.aux_prediction.learner import (
    NEXT_TOKEN_TARGETS,
    STATE_TARGETS,
    NextTokenAuxLoss,
    NextTokenAuxPPOLearner,
    StateAuxLoss,
    StateAuxPPOLearner,
)

__all__ = [
    "NEXT_TOKEN_TARGETS",
    "STATE_TARGETS",
    "NextTokenAuxLoss",
    "NextTokenAuxPPOLearner",
    "StateAuxLoss",
    "StateAuxPPOLearner",
]
