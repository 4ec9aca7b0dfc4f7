"""Quantile value heads for PPO critics: IQN (sampled taus) and QR (fixed midpoint taus).

    from rl.learners.models import MLPModel, TransformerModel
    from rl.learners.quantile_critic import IQNValueMixin, QRValueMixin

    class IQNTransformerModel(IQNValueMixin, TransformerModel):
        pass

    class QRMLPModel(QRValueMixin, MLPModel):
        pass

    model_config = {"iqn_value": {"train_quantiles": 32, "value_quantiles": 64, "n_cosines": 64}}
    model_config = {"qr_value": {"num_quantiles": 64}}

The value GAE uses is the mean of the quantiles at fixed midpoint taus, so it is
deterministic. Train the heads with IQNPPOTorchLearner / QRPPOTorchLearner.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import torch
from torch import nn

from rl.learners.models.config import parse_config, require_positive_int
from rl.learners.models.heads import init_linear
from rl.losses import midpoint_taus


@dataclasses.dataclass(frozen=True)
class IQNValueConfig:
    """`model_config["iqn_value"]`; defaults are those of Dabney et al. 2018.

    Attributes:
        train_quantiles: taus sampled uniformly per step for the loss.
        value_quantiles: fixed midpoint taus whose mean quantile is the value.
        n_cosines: size of the `cos(pi * i * tau)`, i = 1..n, tau embedding.
    """

    train_quantiles: int = 32
    value_quantiles: int = 64
    n_cosines: int = 64

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            require_positive_int(field.name, getattr(self, field.name))


@dataclasses.dataclass(frozen=True)
class QRValueConfig:
    """`model_config["qr_value"]`.

    Attributes:
        num_quantiles: outputs of the head, at the fixed taus (i + 0.5) / N; no support bounds.
    """

    num_quantiles: int = 64

    def __post_init__(self) -> None:
        require_positive_int("num_quantiles", self.num_quantiles)


class IQNHead(nn.Module):
    """quantile(x, tau) = w . (features(x) * relu(W cos(pi * i * tau))) + b, i = 1..n_cosines."""

    def __init__(self, input_dim: int, config: IQNValueConfig):
        super().__init__()
        frequencies = math.pi * torch.arange(1, config.n_cosines + 1, dtype=torch.float32)
        self.register_buffer("frequencies", frequencies, persistent=False)
        self.register_buffer("value_taus", midpoint_taus(config.value_quantiles), persistent=False)
        self.tau_embedding = nn.Linear(config.n_cosines, input_dim)
        self.output = init_linear(nn.Linear(input_dim, 1), 1.0)

    def forward(self, features: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        """features (..., d), taus (N,) or (..., N) -> quantiles (..., N)."""
        tau_features = torch.relu(self.tau_embedding(torch.cos(taus.unsqueeze(-1) * self.frequencies)))
        return self.output(features.unsqueeze(-2) * tau_features).squeeze(-1)


class QRHead(nn.Module):
    """A linear map from features to the quantiles at fixed midpoint taus."""

    def __init__(self, input_dim: int, config: QRValueConfig):
        super().__init__()
        self.register_buffer("taus", midpoint_taus(config.num_quantiles), persistent=False)
        self.linear = init_linear(nn.Linear(input_dim, config.num_quantiles), 1.0)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.linear(features)


class QuantileValueMixin:
    """Shared part of the quantile value mixins: the value is the mean fixed-tau quantile.

    Put a mixin before the model class: `class M(IQNValueMixin, MLPModel)`. The head is
    `self.vf` (so EnvRunners drop it) and reads `self.value_head_input(embeddings)`.
    """

    model_config_section: ClassVar[str]
    settings_class_of_head: ClassVar[type]

    def head_config(self) -> Any:
        """This head's validated section of `model_config` (defaults where a field is absent)."""
        section = self.model_config_section
        values = self.model_config.get(section, {})  # type: ignore[attr-defined]
        return parse_config(self.settings_class_of_head, values, where=f"model_config['{section}']")

    def value_quantiles(self, embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Quantiles (..., N) at the fixed midpoint taus (N,): deterministic."""
        raise NotImplementedError

    def training_value_quantiles(self, embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Quantiles (..., N) and their taus, (N,) or (..., N), for the quantile regression loss."""
        raise NotImplementedError

    def values_from_embeddings(self, embeddings: torch.Tensor) -> torch.Tensor:
        quantiles, _ = self.value_quantiles(embeddings)
        return quantiles.mean(dim=-1)


class IQNValueMixin(QuantileValueMixin):
    """Implicit quantile critic; config: `IQNValueConfig` in `model_config["iqn_value"]`."""

    model_config_section = "iqn_value"
    settings_class_of_head = IQNValueConfig

    def build_value_head(self, input_dim: int) -> IQNHead:
        self.iqn_config = self.head_config()
        return IQNHead(input_dim, self.iqn_config)

    def value_quantiles(self, embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        taus = self.vf.value_taus
        return self.vf(self.value_head_input(embeddings), taus), taus

    def training_value_quantiles(self, embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.value_head_input(embeddings)
        taus = torch.rand(*features.shape[:-1], self.iqn_config.train_quantiles, device=features.device)
        return self.vf(features, taus), taus


class QRValueMixin(QuantileValueMixin):
    """Quantile-regression critic; config: `QRValueConfig` in `model_config["qr_value"]`."""

    model_config_section = "qr_value"
    settings_class_of_head = QRValueConfig

    def build_value_head(self, input_dim: int) -> QRHead:
        return QRHead(input_dim, self.head_config())

    def value_quantiles(self, embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.vf(self.value_head_input(embeddings)), self.vf.taus

    def training_value_quantiles(self, embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.value_quantiles(embeddings)
