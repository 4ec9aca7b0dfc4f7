"""PPGAuxiliaryValueHead: the single-network "detach" design of Phasic Policy Gradient.

    from rl.learners.models import MLPModel, TransformerModel
    from rl.learners.ppg import PPGAuxiliaryValueHead

    class PPGTransformer(PPGAuxiliaryValueHead, TransformerModel):
        pass

    model_config = {"vf_share_layers": True, ...}   # one encoder; PPGConfig writes it by default

One encoder feeds three heads. The policy head `pi` reads the embeddings as they
are; the true value head `vf` reads them detached, so PPO's value loss never shapes
the encoder during policy phases (Cobbe et al. 2020, section 3.1, "detach"); the
auxiliary value head `aux_vf` reads them undetached and is trained, with the
encoder, only in PPG's auxiliary phases (PPGTorchLearner). `aux_vf` is a
training-only head: EnvRunners drop it.
"""

from __future__ import annotations

import torch

from rl.learners.models.heads import ValueHead
from rl.learners.models.mlp import MLPModel
from rl.learners.models.transformer import TransformerModel

AUX_VALUE_HEAD = "aux_vf"


class PPGAuxiliaryValueHead:
    """Detached true value head plus an undetached auxiliary value head; put it before the model class."""

    def setup(self) -> None:
        super().setup()  # type: ignore[misc]
        if not self.module_config.vf_share_layers:  # type: ignore[attr-defined]
            raise ValueError(
                f"{type(self).__name__} is PPG's single-network detach design and needs one shared encoder: "
                "set model_config['vf_share_layers'] = True (PPGConfig does so unless you override it)."
            )
        self.aux_vf = ValueHead(self.embedding_dim)  # type: ignore[attr-defined]

    def value_head_input(self, embeddings: torch.Tensor) -> torch.Tensor:
        return embeddings.detach()

    def aux_values_from_embeddings(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Auxiliary values (B,) or (B, T), with gradients into the encoder."""
        return self.aux_vf(embeddings)

    def get_non_inference_attributes(self) -> list[str]:
        return super().get_non_inference_attributes() + [AUX_VALUE_HEAD]  # type: ignore[misc]


class PPGMLPModel(PPGAuxiliaryValueHead, MLPModel):
    """PPGConfig's default module: an MLPModel with PPG's heads."""


class PPGTransformerModel(PPGAuxiliaryValueHead, TransformerModel):
    """A TransformerModel with PPG's heads (memory tasks)."""
