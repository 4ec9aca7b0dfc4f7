"""TransformerModel: a causal transformer over the observation history, as a stateful RLModule.

    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from rl.learners import ActorCriticPPOTorchLearner
    from rl.learners.models import TransformerModel

    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .rl_module(rl_module_spec=RLModuleSpec(
            module_class=TransformerModel,
            model_config={"d_model": 64, "n_heads": 4, "n_layers": 2, "memory_len": 16,
                          "max_seq_len": 16, "vf_share_layers": True},
        ))
        .training(minibatch_size=256)               # a multiple of max_seq_len
        .learners(learner_class=ActorCriticPPOTorchLearner)   # checks that when built
    )

Each step attends to itself and the `memory_len` steps before it (a sliding
window, pre-LayerNorm blocks, a learned bias per head and distance). The
recurrent state is every layer's keys and values for those `memory_len` steps
plus a validity mask, so a rollout step computes one new token at the same cost
at any episode position. Training runs RLlib's `max_seq_len` chunks at once,
attending to the cached keys and values in `STATE_IN` (as in Transformer-XL, no
gradient flows into the cache); it reproduces step-by-step rollout outputs
exactly (up to float rounding).

Analysis reads the residual stream (the projected input and the output of each
block) in a batch or step by step:

    stream = module.residual_stream(obs)            # obs (B, T, obs_dim) from episode starts
    stream.activations                              # (n_layers + 1, B, T, d_model)
    step = module.residual_stream(obs[:, :1])       # or one step at a time ...
    step = module.residual_stream(obs[:, 1:2], step.state_out)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.utils.annotations import override
from torch import nn

from rl.learners.models.base import ACTOR_ENCODER, ActorCriticModule
from rl.learners.models.config import TransformerConfig


@dataclasses.dataclass(frozen=True)
class ResidualStream:
    """Residual-stream activations of one encoder run.

    Attributes:
        activations: (n_layers + 1, B, T, d_model): the projected observations, then the
            stream after each block (before the final LayerNorm).
        state_out: the recurrent state after the last step (valid when the input has no
            zero padding), to pass back as `state` for the next steps.
    """

    activations: torch.Tensor
    state_out: dict[str, torch.Tensor]


@dataclasses.dataclass(frozen=True)
class AttentionWindow:
    """Which keys each query sees; built once per encoder call and shared by all blocks.

        window = AttentionWindow.build(valid_keys, length=T, memory=M)    # valid_keys (B, M + T) bool
        scores_bias = distance_bias[:, window.distances] + window.mask    # (B, n_heads, T, M + T)

    Keys are the cached steps (positions 0..M-1) followed by the new ones (M..M+T-1).

    Attributes:
        distances: (T, M + T) query-to-key distances clamped to [0, M] (indices into `distance_bias`).
        mask: (B, 1, T, M + T) additive score mask: 0 for a valid key in the window, -inf otherwise.
    """

    distances: torch.Tensor
    mask: torch.Tensor

    @classmethod
    def build(cls, valid_keys: torch.Tensor, *, length: int, memory: int) -> AttentionWindow:
        device = valid_keys.device
        query_positions = torch.arange(memory, memory + length, device=device).unsqueeze(1)
        distances = query_positions - torch.arange(memory + length, device=device)
        clamped = distances.clamp(0, memory)
        allowed = (clamped == distances) & valid_keys.unsqueeze(1)  # in the window and valid
        mask = torch.where(allowed, 0.0, float("-inf"))
        return cls(distances=clamped, mask=mask.unsqueeze(1))


# Steps (batch x time) one no-gradient encoder pass handles at once; see TransformerEncoder.forward.
ROWS_PER_INFERENCE_PIECE = 1024


class TransformerBlock(nn.Module):
    """Pre-LayerNorm block: windowed causal self-attention over cached + new keys, then an MLP."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        d_model = config.d_model
        self.n_heads = config.n_heads
        self.head_scale = (d_model // config.n_heads) ** -0.5
        self.attention_norm = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.attention_out = nn.Linear(d_model, d_model)
        # One learned score offset per head and distance 0..memory_len: the only position signal.
        self.distance_bias = nn.Parameter(torch.zeros(config.n_heads, config.memory_len + 1))
        self.mlp_norm = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, config.feedforward_dim), nn.GELU(), nn.Linear(config.feedforward_dim, d_model)
        )

    def _split_heads(self, tensor: torch.Tensor) -> torch.Tensor:
        """(B, L, d) -> (B, n_heads, L, d / n_heads), a view."""
        batch, length, width = tensor.shape
        return tensor.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2)

    def _attend(
        self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, window: AttentionWindow
    ) -> torch.Tensor:
        """Attention of queries (B, T, d) over keys and values (B, M + T, d); returns (B, n_heads, T, d / n_heads)."""
        queries, keys, values = self._split_heads(queries), self._split_heads(keys), self._split_heads(values)
        scores_bias = self.distance_bias[:, window.distances] + window.mask
        if not torch.is_grad_enabled() or torch.compiler.is_compiling():
            # Rollouts and GAE: the fused CPU kernel. torch.export traces this form too (the
            # reshapes below need contiguity guards its symbolic shapes cannot satisfy).
            return F.scaled_dot_product_attention(queries, keys, values, attn_mask=scores_bias)
        # With gradients, a learned bias sends scaled_dot_product_attention to its unfused CPU math
        # path, which costs more ops forward and backward than these three.
        batch, heads, length, head_dim = queries.shape
        key_length = keys.shape[2]
        scores = torch.baddbmm(
            scores_bias.reshape(batch * heads, length, key_length),
            queries.reshape(batch * heads, length, head_dim),
            keys.reshape(batch * heads, key_length, head_dim).transpose(1, 2),
            alpha=self.head_scale,
        )
        attended = torch.bmm(scores.softmax(dim=-1), values.reshape(batch * heads, key_length, head_dim))
        return attended.view(batch, heads, length, head_dim)

    def forward(
        self, x: torch.Tensor, cached_keys: torch.Tensor, cached_values: torch.Tensor, window: AttentionWindow
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, d); cached_* (B, M, d). Returns the new stream and the keys and values of cache + new steps."""
        queries, new_keys, new_values = self.qkv(self.attention_norm(x)).split(x.shape[-1], dim=-1)
        keys = torch.cat([cached_keys, new_keys], dim=1)
        values = torch.cat([cached_values, new_values], dim=1)
        attended = self._attend(queries, keys, values, window).transpose(1, 2).flatten(2)
        x = x + self.attention_out(attended)
        x = x + self.mlp(self.mlp_norm(x))
        return x, keys, values


class TransformerEncoder(nn.Module):
    """The encoder of TransformerModel; state: {"keys", "values": (n_layers, M, d), "valid": (M,)}."""

    def __init__(self, input_dim: int, config: TransformerConfig):
        super().__init__()
        self.memory_len = config.memory_len
        self.n_layers = config.n_layers
        self.output_dim = config.d_model
        self.input_projection = nn.Linear(input_dim, config.d_model)
        self.blocks = nn.ModuleList(TransformerBlock(config) for _ in range(config.n_layers))
        self.final_norm = nn.LayerNorm(config.d_model)

    def initial_state(self) -> dict[str, np.ndarray]:
        cache = np.zeros((self.n_layers, self.memory_len, self.output_dim), dtype=np.float32)
        return {"keys": cache, "values": cache.copy(), "valid": np.zeros(self.memory_len, dtype=np.float32)}

    def _run_blocks(
        self, obs: torch.Tensor, state_in: dict[str, torch.Tensor] | None, *, with_state: bool = True
    ) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        """The stream after the projection and after each block, and the state after the last step ({} without `with_state`)."""
        if obs.dim() != 3:
            raise ValueError(f"TransformerEncoder expects observations (B, T, obs_dim), got shape {tuple(obs.shape)}.")
        batch, length, _ = obs.shape
        if state_in is None:
            state_in = {
                name: torch.as_tensor(array, device=obs.device).expand(batch, *array.shape)
                for name, array in self.initial_state().items()
            }
        memory = self.memory_len
        new_steps = torch.ones(batch, length, dtype=torch.bool, device=obs.device)
        valid_keys = torch.cat([state_in["valid"] > 0.5, new_steps], dim=1)
        window = AttentionWindow.build(valid_keys, length=length, memory=memory)
        x = self.input_projection(obs)
        stream, keys_out, values_out = [x], [], []
        for layer, block in enumerate(self.blocks):
            x, keys, values = block(x, state_in["keys"][:, layer], state_in["values"][:, layer], window)
            stream.append(x)
            if with_state:
                keys_out.append(keys[:, -memory:])
                values_out.append(values[:, -memory:])
        if not with_state:
            return stream, {}
        state_out = {
            "keys": torch.stack(keys_out, dim=1),
            "values": torch.stack(values_out, dim=1),
            "valid": valid_keys[:, -memory:].to(obs.dtype),
        }
        return stream, state_out

    def residual_stream(self, obs: torch.Tensor, state_in: dict[str, torch.Tensor] | None = None) -> ResidualStream:
        """Runs the blocks over obs (B, T, obs_dim) after `state_in` (None: episode start)."""
        stream, state_out = self._run_blocks(obs, state_in)
        return ResidualStream(activations=torch.stack(stream), state_out=state_out)

    def forward(
        self, obs: torch.Tensor, state_in: dict[str, torch.Tensor] | None, *, with_state: bool = True
    ) -> tuple[torch.Tensor, dict]:
        batch, length = obs.shape[:2]
        if torch.is_grad_enabled() or batch * length <= ROWS_PER_INFERENCE_PIECE:
            return self._encode_at_once(obs, state_in, with_state=with_state)
        # A large batch without gradients (GAE's value pass over a whole train batch) runs in
        # pieces whose activations stay in the CPU cache: about a third faster than at once.
        rows = max(1, ROWS_PER_INFERENCE_PIECE // length)
        pieces = []
        for start in range(0, batch, rows):
            piece_state = state_in and {key: value[start : start + rows] for key, value in state_in.items()}
            pieces.append(self._encode_at_once(obs[start : start + rows], piece_state, with_state=with_state))
        state_out = {key: torch.cat([state[key] for _, state in pieces]) for key in pieces[0][1]}
        return torch.cat([embeddings for embeddings, _ in pieces]), state_out

    def _encode_at_once(
        self, obs: torch.Tensor, state_in: dict[str, torch.Tensor] | None, *, with_state: bool = True
    ) -> tuple[torch.Tensor, dict]:
        stream, state_out = self._run_blocks(obs, state_in, with_state=with_state)
        return self.final_norm(stream[-1]), state_out


class TransformerModel(ActorCriticModule):
    """Stateful actor-critic module over a sliding-window causal transformer; config: `TransformerConfig`.

    With `vf_share_layers=False` the value head reads a critic transformer of its own. Its
    cache at a chunk's start depends on up to n_layers x memory_len earlier steps, which a
    continued episode's chunk no longer holds in the Learner; so EnvRunners keep that encoder
    and run it while sampling (a rollout step costs two encoder passes), and each chunk's
    `STATE_IN` carries both caches (`tests/transformer_test.py` checks the Learner's values
    against the critic run step by step from each episode's start).
    """

    config_class = TransformerConfig

    def setup(self) -> None:
        super().setup()
        # RLlib's connectors read the chunk length from the module's model_config.
        self.model_config = {**self.model_config, "max_seq_len": self.module_config.max_seq_len}

    def build_encoder(self, input_dim: int) -> TransformerEncoder:
        return TransformerEncoder(input_dim, self.module_config)

    def check_algorithm_config(self, config: Any) -> None:
        minibatch_size = config.minibatch_size or config.train_batch_size_per_learner
        max_seq_len = self.module_config.max_seq_len
        if minibatch_size % max_seq_len:
            raise ValueError(
                f"minibatch_size ({minibatch_size}) must be a multiple of model_config['max_seq_len'] "
                f"({max_seq_len}): RLlib cuts minibatches in whole chunks, so a smaller or uneven size "
                f"gives empty or truncated minibatches. Set e.g. "
                f"config.training(minibatch_size={max(1, round(minibatch_size / max_seq_len)) * max_seq_len})."
            )

    @override(ValueFunctionAPI)
    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        seq_lens = batch.get(Columns.SEQ_LENS)
        if embeddings is not None or seq_lens is None or torch.is_grad_enabled():
            return super().compute_values(batch, embeddings)
        return self._values_up_to_seq_lens(batch, seq_lens)

    def _values_up_to_seq_lens(self, batch: dict[str, Any], seq_lens: torch.Tensor) -> torch.Tensor:
        """Values (B, T) of a zero-padded chunk batch (GAE's value pass), exact before each seq_len.

        Chunks run in pieces of similar length with the time axis cut to the piece's
        longest: attention is causal, so a step's value never reads the padding after it.
        The padding's values are arbitrary (GAE drops them). On bench_learners' CartPole
        batch (half of it padding) the pass takes ~25% less time (38 -> 29 ms), ~3% of
        an update; on the main job's (20% padding) it is no faster.
        """
        obs = batch[Columns.OBS]
        lengths = seq_lens.long()
        order = torch.argsort(lengths, descending=True, stable=True)
        values = obs.new_zeros(obs.shape[:2])
        start = 0
        while start < len(order):
            length = int(lengths[order[start]])
            rows = order[start : start + max(1, ROWS_PER_INFERENCE_PIECE // length)]
            piece = {Columns.OBS: obs[rows, :length], Columns.STATE_IN: _rows_of(batch.get(Columns.STATE_IN), rows)}
            values[rows, :length] = super().compute_values(piece)
            start += len(rows)
        return values

    def residual_stream(
        self, obs: torch.Tensor, state: dict[str, torch.Tensor] | None = None, *, encoder: str = ACTOR_ENCODER
    ) -> ResidualStream:
        """Residual-stream activations of `encoder` ("encoder" or "critic_encoder") for obs (B, T, obs_dim).

        `state` is that encoder's state (None: episode start), e.g. the previous call's `state_out`.
        """
        if encoder not in self.encoder_names():
            raise ValueError(f"encoder must be one of {self.encoder_names()}, got {encoder!r}.")
        return getattr(self, encoder).residual_stream(obs, state)


def _rows_of(state: Any, rows: torch.Tensor) -> Any:
    """The given batch rows of every tensor in a (nested dict) recurrent state; None stays None."""
    if isinstance(state, dict):
        return {key: _rows_of(value, rows) for key, value in state.items()}
    return None if state is None else state[rows]
