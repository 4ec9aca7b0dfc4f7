"""The actor-critic RLModule that MLPModel and TransformerModel specialise.

    class MyModel(ActorCriticModule):
        config_class = MyConfig            # validated fields read from model_config

        def build_encoder(self, input_dim):    # -> an Encoder (see below)
            return MyEncoder(input_dim, self.module_config)

Layout: `encoder` -> `pi` (policy head) and, through `value_head_input`, `vf` (value
head). With `vf_share_layers=False` the value head reads its own `critic_encoder`.
Value-head mixins (IQNValueMixin, QRValueMixin) replace `build_value_head` and
`values_from_embeddings`; a detach design (PPG) overrides `value_head_input` to return
`embeddings.detach()`, so the value loss cannot shape the shared encoder.
Exploration (sampling for training) also returns the critic's embedding of each step
(`CRITIC_EMBEDDINGS`) where the critic's encoder runs while sampling; GAE reads values
from them through the value head.

An encoder is an `nn.Module` with `output_dim`, `initial_state()` (a dict of numpy
arrays without batch axis; `{}` when stateless) and `forward(obs, state_in, *,
with_state=True) -> (embeddings, state_out)`; with `with_state=False` (training and
value passes, which read no state) it may return `{}` for the state. Stateful encoders
see observations as (B, T, obs_dim) and their state under
`Columns.STATE_IN[<encoder attribute name>]`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.annotations import override
from torch import nn

from rl.learners.models.config import ActorCriticConfig, parse_config
from rl.learners.models.heads import ValueHead, build_policy_head

ACTOR_ENCODER = "encoder"
CRITIC_ENCODER = "critic_encoder"
# An extra model output of exploration: the critic encoder's embedding of each sampled step,
# from which GAE computes the values without encoding the train batch again (rl.learners.advantages).
CRITIC_EMBEDDINGS = "critic_embeddings"


def observation_dim(observation_space: gym.Space) -> int:
    """The feature size of a 1-D Box observation space (the only kind the encoders read)."""
    if isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) == 1:
        return int(observation_space.shape[0])
    raise ValueError(
        f"unsupported observation space {observation_space}: the actor-critic modules read 1-D Box "
        "observations; add RLlib's FlattenObservations env-to-module connector "
        "(config.env_runners(env_to_module_connector=lambda env, spaces, device: FlattenObservations()))."
    )


class ActorCriticModule(TorchRLModule, ValueFunctionAPI, InferenceOnlyAPI):
    """Encoder plus policy and value heads, emitting `Columns.EMBEDDINGS` for the critic.

    Subclasses set `config_class` and implement `build_encoder`; mixins that read a
    `model_config` section set `model_config_section`.
    """

    config_class: ClassVar[type[ActorCriticConfig]] = ActorCriticConfig
    model_config_section: ClassVar[str | None] = None

    @override(RLModule)
    def setup(self) -> None:
        self.module_config = parse_config(
            self.config_class,
            self.model_config,
            where=f"{type(self).__name__}'s model_config",
            sections=self.model_config_sections(),
        )
        input_dim = observation_dim(self.observation_space)
        self.encoder = self.build_encoder(input_dim)
        self.stateful_critic_encoder = False
        if not self.module_config.vf_share_layers:
            self.critic_encoder = self.build_encoder(input_dim)
            # A stateful critic's state must be collected while sampling, so EnvRunners keep
            # and run it (get_non_inference_attributes leaves it out).
            self.stateful_critic_encoder = bool(self.critic_encoder.initial_state())
        self.embedding_dim: int = self.encoder.output_dim
        self.pi = build_policy_head(self.action_space, self.embedding_dim)
        self.vf = self.build_value_head(self.embedding_dim)
        if self.inference_only:
            self.eval()  # an EnvRunner's copy never trains

    @classmethod
    def model_config_sections(cls) -> list[str]:
        """The `model_config` sections read by the mixins in this class's bases."""
        sections = (klass.__dict__.get("model_config_section") for klass in cls.__mro__)
        return [section for section in sections if section]

    def build_encoder(self, input_dim: int) -> nn.Module:
        """Returns a fresh encoder reading `input_dim` features (called once per encoder)."""
        raise NotImplementedError(f"{type(self).__name__} must implement build_encoder.")

    def build_value_head(self, input_dim: int) -> nn.Module:
        """Returns the value head; mixins replace it with a quantile head."""
        return ValueHead(input_dim)

    def value_head_input(self, embeddings: torch.Tensor) -> torch.Tensor:
        """What every value head reads; a detach design returns `embeddings.detach()`."""
        return embeddings

    def values_from_embeddings(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Values (B,) or (B, T) from critic embeddings."""
        return self.vf(self.value_head_input(embeddings))

    def check_algorithm_config(self, config: Any) -> None:
        """Raises ValueError if `config` (an AlgorithmConfig) cannot train this module.

        Learners in rl.learners call it when they are built; this module needs nothing.
        """

    @property
    def critic_encoder_name(self) -> str:
        """The attribute name of the encoder the value head reads."""
        return ACTOR_ENCODER if self.module_config.vf_share_layers else CRITIC_ENCODER

    def encoder_names(self) -> list[str]:
        """The attribute names of this module's encoders."""
        return [ACTOR_ENCODER] if self.module_config.vf_share_layers else [ACTOR_ENCODER, CRITIC_ENCODER]

    def rollout_encoder_names(self) -> list[str]:
        """The encoders that run while sampling: the actor's, and a stateful critic's for its state."""
        return [ACTOR_ENCODER] + ([CRITIC_ENCODER] if self.stateful_critic_encoder else [])

    @override(RLModule)
    def get_initial_state(self) -> dict[str, dict[str, np.ndarray]]:
        states = {name: getattr(self, name).initial_state() for name in self.rollout_encoder_names()}
        return {name: state for name, state in states.items() if state}

    def batched_initial_state(self, batch_size: int) -> dict[str, dict[str, torch.Tensor]]:
        """`get_initial_state()` as tensors with a leading batch axis, e.g. to step the module by hand.

        Example:
            state = module.batched_initial_state(1)
            for obs in observations:  # each (1, 1, obs_dim)
                out = module.forward_inference({Columns.OBS: obs, Columns.STATE_IN: state})
                state = out[Columns.STATE_OUT]
        """
        return {
            name: {key: torch.as_tensor(array).expand(batch_size, *array.shape).clone() for key, array in state.items()}
            for name, state in self.get_initial_state().items()
        }

    def _encode(
        self, batch: dict[str, Any], names: list[str], *, with_state: bool = True
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """Runs the named encoders; returns their embeddings and the non-empty state outs (none without `with_state`)."""
        state_in = batch.get(Columns.STATE_IN) or {}
        embeddings, state_out = {}, {}
        for name in names:
            embeddings[name], state = getattr(self, name)(batch[Columns.OBS], state_in.get(name), with_state=with_state)
            if state:
                state_out[name] = state
        return embeddings, state_out

    def _rollout_outputs(self, batch: dict[str, Any], *, critic_embeddings: bool) -> dict[str, Any]:
        embeddings, state_out = self._encode(batch, self.rollout_encoder_names())
        output = {Columns.ACTION_DIST_INPUTS: self.pi(embeddings[ACTOR_ENCODER])}
        if state_out:
            output[Columns.STATE_OUT] = state_out
        if critic_embeddings and self.critic_encoder_name in embeddings:
            output[CRITIC_EMBEDDINGS] = embeddings[self.critic_encoder_name]
        return output

    @override(RLModule)
    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._rollout_outputs(batch, critic_embeddings=False)

    @override(RLModule)
    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        # Sampling for training: where the critic's encoder runs anyway (shared, or stateful),
        # its embeddings go with each step, so that GAE needs only the value head.
        return self._rollout_outputs(batch, critic_embeddings=True)

    @override(TorchRLModule)
    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        # TorchRLModule switches every submodule to eval() (and back) on each call, ~0.1 ms a
        # step for TransformerModel (docs/performance.md); in eval mode already, skip that.
        if self.training:
            return super().forward_exploration(batch, **kwargs)
        # Inference mode skips autograd's bookkeeping that no_grad keeps (version counters):
        # 0.57 -> 0.52 ms a step for the main job's 32 envs. Its outputs are inference tensors:
        # a module-to-env piece must not change them in place (e.g. mask logits out of place).
        with torch.inference_mode():
            return self._forward_exploration(batch, **kwargs)

    @override(TorchRLModule)
    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if self.training:  # as forward_exploration
            return super().forward_inference(batch, **kwargs)
        return self._forward_inference(batch, **kwargs)

    @override(TorchRLModule)
    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        # TorchRLModule calls train() on all 26 submodules of TransformerModel before each SGD
        # step: 0.05 ms, 1.7 ms an update of the main job (2026-12-05); in train mode already, skip it.
        if not self.training:
            return super().forward_train(batch, **kwargs)
        return RLModule.forward_train(self, batch, **kwargs)

    @override(RLModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        # No STATE_OUT: training chunks are zero-padded, and nothing downstream reads it. Not
        # building it saves ~4% of a main-job update (TransformerModel stacks its caches: 186 -> 178 ms).
        embeddings, _ = self._encode(batch, self.encoder_names(), with_state=False)
        return {
            Columns.ACTION_DIST_INPUTS: self.pi(embeddings[ACTOR_ENCODER]),
            Columns.EMBEDDINGS: embeddings[self.critic_encoder_name],
        }

    @override(ValueFunctionAPI)
    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is None:
            encoded, _ = self._encode(batch, [self.critic_encoder_name], with_state=False)
            embeddings = encoded[self.critic_encoder_name]
        return self.values_from_embeddings(embeddings)

    @override(InferenceOnlyAPI)
    def get_non_inference_attributes(self) -> list[str]:
        training_only = ["vf"]
        if not self.module_config.vf_share_layers and not self.stateful_critic_encoder:
            training_only.append(CRITIC_ENCODER)
        return training_only
