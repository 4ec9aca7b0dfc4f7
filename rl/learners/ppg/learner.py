"""PPGTorchLearner: PPO updates plus Phasic Policy Gradient's auxiliary phases (detach variant).

    from rl.learners import PPGConfig
    algo = PPGConfig().environment("CartPole-v1").build_algo()   # PPGTorchLearner is the default

Policy phase: every `Learner.update` is one PPO iteration. Its post-connector batch
(observations, recurrent state, loss mask and the GAE lambda returns fixed at
collection) is copied to a CPU buffer; the raw episodes are not kept.

Auxiliary phase, after every `policy_iterations_per_aux` updates, inside that update:
1. pi_frozen: the policy's action-distribution inputs on every buffered batch, computed
   once before the first auxiliary step (the policy "taken at the start of the phase").
2. `aux_epochs` passes: batches in shuffled order, one at a time moved to the
   Learner's device and cut into shuffled minibatches of `aux_minibatch_size` env
   steps; each minibatch steps the auxiliary Adam optimizer on
       beta_clone * KL(pi_frozen || pi)
       + aux_value_loss_coeff * 0.5 * mean((V_aux - V_targ)^2)
       + aux_true_value_loss_coeff * 0.5 * mean((V - V_targ)^2)
   over the LOSS_MASK steps. V_aux reads the encoder undetached; V reads it detached.
3. The buffer is cleared and `_weights_seq_no` incremented so EnvRunners take the weights.

The auxiliary optimizer is not registered (RLlib steps every registered optimizer on
every PPO minibatch); `get_state`/`set_state` carry its state under "ppg_aux_optimizer".

Checkpoints: resume restarts the cycle. The buffer (up to N_pi batches) and the
iteration counter are not saved; restoring a Learner state that holds the aux
optimizer empties the buffer and restarts the count, so the first auxiliary phase
after a resume comes `policy_iterations_per_aux` iterations later.

Metrics (per module unless noted): `ppg/aux_phase_triggered`, `ppg/iterations_since_aux`,
`ppg/buffered_env_steps`, `ppg/buffer_bytes` (all modules); `ppg/aux_kl`, `ppg/aux_kl_max`,
`ppg/aux_value_loss`, `ppg/aux_true_value_loss` (means over the last aux epoch),
`ppg/aux_value_loss_first_epoch`, `ppg/aux_minibatches`, `ppg/aux_seconds` (aux phases only).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from ray.rllib.core import ALL_MODULES
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import COMPONENT_OPTIMIZER, Learner
from ray.rllib.utils.annotations import override
from ray.rllib.utils.numpy import convert_to_numpy

from rl.learners.gradient_steps import fused_adam
from rl.learners.minibatches import map_tensors
from rl.learners.ppg.defaults import validate_ppg_config
from rl.learners.ppg.module import PPGAuxiliaryValueHead
from rl.learners.ppo.learner import ActorCriticPPOTorchLearner
from rl.losses import masked_mean

AUX_OPTIMIZER_STATE = "ppg_aux_optimizer"
# What the auxiliary losses and a module's forward_train read; the rest of the batch is dropped.
BUFFERED_COLUMNS = (Columns.OBS, Columns.STATE_IN, Columns.SEQ_LENS, Columns.LOSS_MASK, Columns.VALUE_TARGETS)
FROZEN_DIST_INPUTS = "ppg_frozen_action_dist_inputs"


def nest_bytes(value: Any) -> int:
    """Bytes held by the tensors in a nest of dicts."""
    if isinstance(value, dict):
        return sum(nest_bytes(item) for item in value.values())
    return value.element_size() * value.nelement()


class AuxiliaryBuffer:
    """Post-connector batches of the current PPG cycle, on CPU: a list of {module_id: columns}.

    Example:
        buffer.add(multi_agent_batch)      # in each policy iteration
        for batch in buffer.batches: ...   # in the auxiliary phase
        buffer.clear()
    """

    def __init__(self) -> None:
        self.batches: list[dict[str, dict[str, Any]]] = []
        self.env_steps = 0
        self.nbytes = 0

    def add(self, batch: Any) -> None:
        snapshot = {}
        for module_id, module_batch in batch.policy_batches.items():
            if Columns.VALUE_TARGETS not in module_batch:
                raise ValueError(
                    f"PPG's auxiliary phase needs the batch's '{Columns.VALUE_TARGETS}' for module {module_id!r}; "
                    "keep RLlib's GeneralAdvantageEstimation learner connector (use_gae=True, use_critic=True)."
                )
            columns = {column: module_batch[column] for column in BUFFERED_COLUMNS if column in module_batch}
            snapshot[module_id] = map_tensors(lambda tensor: torch.as_tensor(tensor).detach().to("cpu"), columns)
        self.batches.append(snapshot)
        self.env_steps += batch.env_steps()
        self.nbytes += nest_bytes(snapshot)

    def clear(self) -> None:
        self.__init__()


def minibatch_rows(columns: dict[str, Any], minibatch_steps: int, rng: np.random.Generator) -> Iterator[torch.Tensor]:
    """Shuffled row indices of one module batch, `minibatch_steps` env steps at a time.

    Rows are steps, or `max_seq_len` chunks when the batch has a time axis (stateful modules).
    """
    mask = columns[Columns.LOSS_MASK]
    steps_per_row = mask.shape[1] if mask.dim() == 2 else 1
    rows_per_minibatch = max(1, minibatch_steps // steps_per_row)
    order = torch.as_tensor(rng.permutation(mask.shape[0]))
    yield from torch.split(order, rows_per_minibatch)


class PPGTorchLearner(ActorCriticPPOTorchLearner):
    """PPO Learner that buffers its batches and runs PPG's auxiliary phases (module docstring)."""

    @override(Learner)
    def build(self) -> None:
        super().build()
        validate_ppg_config(self.config)
        self._aux_optimizers: dict[str, torch.optim.Optimizer] = {}
        for module_id in self.module.keys():
            module = self.module[module_id].unwrapped()
            if not isinstance(module, PPGAuxiliaryValueHead):
                raise TypeError(
                    f"PPGTorchLearner trains modules with PPGAuxiliaryValueHead, but module {module_id!r} is "
                    f"{type(module).__name__}; use e.g. `class Model(PPGAuxiliaryValueHead, "
                    f"{type(module).__name__}): pass`."
                )
            self._aux_optimizers[module_id] = fused_adam(module.parameters(), lr=self.config.aux_lr)
        self.aux_buffer = AuxiliaryBuffer()
        self.iterations_since_aux = 0
        self._aux_rng = np.random.default_rng(self.config.seed)

    @override(Learner)
    def _make_batch_if_necessary(self, training_data: Any) -> Any:
        batch = super()._make_batch_if_necessary(training_data)
        self.aux_buffer.add(batch)
        return batch

    @override(Learner)
    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        super().after_gradient_based_update(timesteps=timesteps)
        self.iterations_since_aux += 1
        triggered = self.iterations_since_aux >= self.config.policy_iterations_per_aux
        # Logged before the phase, so a triggering iteration reports the full buffer it trained on.
        cycle = {
            "ppg/aux_phase_triggered": float(triggered),
            "ppg/iterations_since_aux": self.iterations_since_aux,
            "ppg/buffered_env_steps": self.aux_buffer.env_steps,
            "ppg/buffer_bytes": self.aux_buffer.nbytes,
        }
        self.metrics.log_dict(cycle, key=ALL_MODULES, window=1)
        if triggered:
            self.run_auxiliary_phase()

    def run_auxiliary_phase(self) -> None:
        """Runs one auxiliary phase on the buffered batches, then clears the buffer (module docstring)."""
        config = self.config
        start = time.monotonic()
        self._store_frozen_policy()
        first_epoch: dict[str, dict[str, list[float]]] = {}
        for epoch in range(config.aux_epochs):
            sums: dict[str, dict[str, list[float]]] = {}
            for index in self._aux_rng.permutation(len(self.aux_buffer.batches)):
                for module_id, columns in self.aux_buffer.batches[index].items():
                    on_device = map_tensors(lambda tensor: tensor.to(self._device), columns)
                    for rows in minibatch_rows(on_device, config.aux_minibatch_size, self._aux_rng):
                        rows = rows.to(self._device)
                        minibatch = map_tensors(lambda tensor, rows=rows: tensor[rows], on_device)
                        terms = self._auxiliary_step(module_id, minibatch)
                        for name, value in terms.items():
                            sums.setdefault(module_id, {}).setdefault(name, []).append(value)
            if epoch == 0:
                first_epoch = sums
        for module_id, terms in sums.items():
            metrics = {f"ppg/{name}": float(np.mean(values)) for name, values in terms.items()}
            metrics["ppg/aux_kl_max"] = float(np.max(terms["aux_kl"]))
            metrics["ppg/aux_value_loss_first_epoch"] = float(np.mean(first_epoch[module_id]["aux_value_loss"]))
            metrics["ppg/aux_minibatches"] = len(terms["aux_kl"]) * config.aux_epochs
            metrics["ppg/aux_seconds"] = time.monotonic() - start
            self.metrics.log_dict(metrics, key=module_id, window=1)
        self.aux_buffer.clear()
        self.iterations_since_aux = 0
        # The weights changed outside the gradient-based update: EnvRunners must pull them.
        self._weights_seq_no += 1

    @torch.no_grad()
    def _store_frozen_policy(self) -> None:
        """Adds the current policy's action-distribution inputs to every buffered batch (the KL target)."""
        for batch in self.aux_buffer.batches:
            for module_id, columns in batch.items():
                on_device = map_tensors(lambda tensor: tensor.to(self._device), columns)
                outputs = self.module[module_id].unwrapped().forward_train(on_device)
                columns[FROZEN_DIST_INPUTS] = outputs[Columns.ACTION_DIST_INPUTS].to("cpu")

    def _auxiliary_step(self, module_id: str, minibatch: dict[str, Any]) -> dict[str, float]:
        """One auxiliary gradient step on one module; returns the unweighted loss terms."""
        config = self.config
        module = self.module[module_id].unwrapped()
        outputs = module.forward_train(minibatch)
        mask = minibatch[Columns.LOSS_MASK]
        targets = minibatch[Columns.VALUE_TARGETS]
        dist_class = module.get_train_action_dist_cls()
        frozen = dist_class.from_logits(minibatch[FROZEN_DIST_INPUTS])
        kl = masked_mean(frozen.kl(dist_class.from_logits(outputs[Columns.ACTION_DIST_INPUTS])), mask)
        embeddings = outputs[Columns.EMBEDDINGS]
        aux_value_loss = 0.5 * masked_mean((module.aux_values_from_embeddings(embeddings) - targets) ** 2, mask)
        true_value_loss = 0.5 * masked_mean((module.values_from_embeddings(embeddings) - targets) ** 2, mask)
        loss = (
            config.beta_clone * kl
            + config.aux_value_loss_coeff * aux_value_loss
            + config.aux_true_value_loss_coeff * true_value_loss
        )
        optimizer = self._aux_optimizers[module_id]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(module.parameters(), config.grad_clip)
        optimizer.step()
        return {
            "aux_kl": kl.item(),
            "aux_value_loss": aux_value_loss.item(),
            "aux_true_value_loss": true_value_loss.item(),
        }

    @override(Learner)
    def get_state(self, components: Any = None, *, not_components: Any = None, **kwargs: Any) -> dict[str, Any]:
        state = super().get_state(components, not_components=not_components, **kwargs)
        if self._check_component(COMPONENT_OPTIMIZER, components, not_components):
            state[AUX_OPTIMIZER_STATE] = {
                module_id: convert_to_numpy(optimizer.state_dict())
                for module_id, optimizer in self._aux_optimizers.items()
            }
        return state

    @override(Learner)
    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        if AUX_OPTIMIZER_STATE not in state:
            return
        for module_id, optimizer_state in state[AUX_OPTIMIZER_STATE].items():
            if module_id in self._aux_optimizers:
                per_parameter = {
                    index: {name: torch.as_tensor(value, device=self._device) for name, value in values.items()}
                    for index, values in optimizer_state["state"].items()
                }
                self._aux_optimizers[module_id].load_state_dict({**optimizer_state, "state": per_parameter})
        # A restored checkpoint restarts the PPG cycle (module docstring).
        self.aux_buffer.clear()
        self.iterations_since_aux = 0
