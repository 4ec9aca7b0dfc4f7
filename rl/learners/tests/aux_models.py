"""The module and Learner that carry both auxiliary prediction terms, for the tests that train or trim their batches.

from rl.learners.tests.aux_models import AuxTransformer, BothAuxPPOLearner
"""

from rl.learners import ActorCriticPPOTorchLearner, NextTokenAuxLoss, StateAuxLoss
from rl.learners.models import NextTokenAuxHead, StateAuxHead, TransformerModel


class AuxTransformer(NextTokenAuxHead, StateAuxHead, TransformerModel):
    pass


class BothAuxPPOLearner(NextTokenAuxLoss, StateAuxLoss, ActorCriticPPOTorchLearner):
    pass
