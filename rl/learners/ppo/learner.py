"""ActorCriticPPOTorchLearner: RLlib's PPOTorchLearner plus a build-time check of our modules.

    from rl.learners import ActorCriticPPOTorchLearner

    config.learners(learner_class=ActorCriticPPOTorchLearner)

When built, it asks every ActorCriticModule whether the algorithm config can train
it (e.g. TransformerModel needs `minibatch_size` to be a multiple of
`max_seq_len`), so a bad combination fails with a clear error before training.
For speed, its SGD steps use fused Adam and one finite check of all gradients
(`FusedGradientStepMixin`), its learner connector cuts episodes into chunks with
`rl.learners.connectors` and computes GAE over all episodes in step (`rl.learners.advantages`),
without autograd and, where the EnvRunner returned the critic's embeddings, without encoding
the batch again, its minibatches are RLlib's taken with one index per column
(`rl.learners.minibatches`), and for Categorical policies it computes RLlib's PPO loss with
fewer ops (`rl.learners.ppo.loss`), logging the loss metrics and the off-policyness of the
last minibatch once per update (RLlib logs them every step with window=1: the same
results), and the steps trained summed once per update. Its train batch keeps only the
chunks that hold a loss step (`chunks_with_loss_steps`), so minibatches are cut from chunks
the loss reads, as the plain PyTorch loop's are. For a pipelined config (one update of policy
lag) its KL term is taken against the policy the update starts from. The IQN, QR and PPG
Learners derive from it.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core import ALL_MODULES
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.policy.sample_batch import SampleBatch
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import (
    MODULE_TRAIN_BATCH_SIZE_MEAN,
    NUM_ENV_STEPS_TRAINED,
    NUM_ENV_STEPS_TRAINED_LIFETIME,
    NUM_MODULE_STEPS_TRAINED,
    NUM_MODULE_STEPS_TRAINED_LIFETIME,
    WEIGHTS_SEQ_NO,
)

from rl.learners.advantages import use_batched_advantages
from rl.learners.connectors import store_chunk_start_states, use_fast_chunking
from rl.learners.gradient_steps import FusedGradientStepMixin
from rl.learners.minibatches import IndexedMinibatchIterator, select_rows
from rl.learners.models.base import ActorCriticModule
from rl.learners.ppo.loss import PPOLossTerms, categorical_ppo_loss, uses_categorical_policy

# The AlgorithmConfig attribute of pipelined sampling (rl.learners.pipelined.PipelinedPPOConfig sets it True).
PIPELINED = "pipelined"


def chunks_with_loss_steps(batch: dict[str, Any]) -> dict[str, Any]:
    """The rows of a chunked (B, T) batch that hold at least one loss step; `batch` itself if all do.

    RLlib appends one artificial step to every episode fragment to bootstrap its value
    and masks it out of the loss. When a fragment's length is a multiple of
    `max_seq_len` (the main job: 64-step episodes in 16-step chunks) that step opens a
    chunk of its own, so a fifth of the chunks carry no loss step. Their loss terms and
    gradients are exactly zero, and every loss here is a mean over `Columns.LOSS_MASK`
    steps, so a minibatch without them has the same loss; the gradients differ by float
    summation order only. Batches without a time axis (MLP modules) pass unchanged.

    Dropped from the whole train batch (as the Learner does), they also leave RLlib's
    minibatch count: RLlib sizes a minibatch of chunks by the batch's steps, bootstrap
    steps included, so the main job's 160 chunks give 34 minibatches of 19 chunks, ~15 of
    them with a loss step; its 128 chunks with loss steps give 32 of 16, the plain
    PyTorch loop's minibatches.

    Example:
        module_batch = chunks_with_loss_steps(module_batch)    # after GAE, before minibatches
    """
    mask = batch.get(Columns.LOSS_MASK)
    if mask is None or mask.dim() != 2 or Columns.SEQ_LENS not in batch:
        return batch
    rows_with_loss = mask.any(dim=1)
    if bool(rows_with_loss.all()):
        return batch
    rows = rows_with_loss.nonzero().squeeze(1)
    return select_rows(batch, rows)


def _with_loss_steps(module_batch: SampleBatch) -> SampleBatch:
    """`module_batch` itself, or a SampleBatch of its chunks that hold a loss step."""
    columns = dict(module_batch)
    kept = chunks_with_loss_steps(columns)
    if kept is columns:
        return module_batch
    return SampleBatch(kept, _zero_padded=module_batch.zero_padded, _max_seq_len=module_batch.max_seq_len)


class ActorCriticPPOTorchLearner(FusedGradientStepMixin, PPOTorchLearner):
    """PPOTorchLearner that validates its ActorCriticModules against the algorithm config."""

    # Its batch reads a stateful module's recurrent state only at chunk starts (PPO reads no next
    # states): an EnvRunner that knows this attribute keeps only those while it samples.
    store_chunk_start_states = staticmethod(store_chunk_start_states)

    @classmethod
    def batch_info_keys(cls) -> frozenset[str]:
        """The keys of the env's infos that this Learner's batch reads: none (PPO's columns hold no infos).

        A pipelined EnvRunner sends its Learner only these keys of every step's info
        (`rl.learners.pipelined.trim_for_learner`). A subclass whose connector reads an info key
        (`connectors.AddInfoColumn`) adds it, as the auxiliary prediction Learners do.
        """
        return frozenset()

    @override(Learner)
    def build(self) -> None:
        super().build()
        # Filled each SGD step, logged once per update (_log_last_minibatch_metrics).
        self._last_loss_terms: dict[str, PPOLossTerms] = {}
        self._last_minibatch: dict[str, Any] | None = None
        # Summed over an update's SGD steps, logged once (_log_trained_steps).
        self._trained_steps: dict[str, int] = {}
        self._trained_env_steps = 0
        if self._learner_connector is not None:
            use_fast_chunking(self._learner_connector)
            use_batched_advantages(self._learner_connector)
        for module_id in self.module.keys():
            module = self.module[module_id].unwrapped()
            if isinstance(module, ActorCriticModule):
                module.check_algorithm_config(self.config.get_config_for_module(module_id))

    @override(Learner)
    def _make_batch_if_necessary(self, training_data: Any) -> Any:
        # The connector only prepares data; its value predictions (GAE) need no autograd graph.
        with torch.no_grad():
            batch = super()._make_batch_if_necessary(training_data)
        for module_id, module_batch in batch.policy_batches.items():
            batch.policy_batches[module_id] = _with_loss_steps(module_batch)
        if getattr(self.config, PIPELINED, False):
            self._take_kl_reference_from_update_start(batch)
        return batch

    def _take_kl_reference_from_update_start(self, batch: Any) -> None:
        """The KL term's reference policy: the Learner's at the update's start, not the one that sampled.

        A pipelined config's batches were sampled with the weights one update older than the
        Learner's (rl.learners.pipelined). Against those, the KL of an update also counts the
        previous update's move, about doubling it, and the adaptive KL coefficient grows on it
        and holds learning back. With the logits of the weights the update starts from, the KL
        term and its adaptation measure one update's move, as in sequential PPO; the clipped
        ratio still divides by the behaviour policy's logp (`Columns.ACTION_LOGP`), which corrects
        for the lag.
        """
        with torch.no_grad():
            for module_id, module_batch in batch.policy_batches.items():
                if Columns.ACTION_DIST_INPUTS in module_batch:
                    outputs = self.module[module_id].forward_train(dict(module_batch))
                    module_batch[Columns.ACTION_DIST_INPUTS] = outputs[Columns.ACTION_DIST_INPUTS]

    @override(Learner)
    def _create_iterator_if_necessary(self, **kwargs: Any) -> Any:
        return IndexedMinibatchIterator.replacing(super()._create_iterator_if_necessary(**kwargs))

    @override(TorchLearner)
    def compute_loss_for_module(
        self, *, module_id: str, config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> Any:
        module = self.module[module_id].unwrapped()
        if not (config.use_critic and uses_categorical_policy(module)):
            return super().compute_loss_for_module(module_id=module_id, config=config, batch=batch, fwd_out=fwd_out)
        total, terms = categorical_ppo_loss(
            module,
            batch,
            fwd_out,
            config=config,
            entropy_coeff=self.entropy_coeff_schedulers_per_module[module_id].get_current_value(),
            kl_coeff=self.curr_kl_coeffs_per_module[module_id],
        )
        self._last_loss_terms[module_id] = terms
        return total

    @override(TorchLearner)
    def _compute_off_policyness(self, batch: dict[str, Any]) -> None:
        self._last_minibatch = batch

    @override(Learner)
    def _log_steps_trained_metrics(self, batch: Any) -> None:
        # RLlib logs eight counters every SGD step; all but the batch-size mean are sums or the
        # last weights number, logged once per update (_log_trained_steps): the same reduced values for less.
        for module_id, module_batch in batch.policy_batches.items():
            self.metrics.log_value((module_id, MODULE_TRAIN_BATCH_SIZE_MEAN), len(module_batch), reduce="mean")
            self._trained_steps[module_id] = self._trained_steps.get(module_id, 0) + len(module_batch)
        self._trained_env_steps += batch.env_steps()

    @override(Learner)
    def _log_metrics(self, batch: Any) -> None:
        # RLlib adds every SGD step's env and module steps to two Prometheus counters of Ray's, a call into
        # Ray's metrics each; _log_trained_steps adds the update's sums once: the same counts.
        pass

    def _log_trained_steps(self) -> None:
        """The step counters `_log_steps_trained_metrics` summed over the update, as RLlib names and reduces them,
        and to Ray's two Prometheus counters that RLlib's `_log_metrics` adds to every SGD step."""
        if self._trained_env_steps > 0:
            self._metrics_all_modules_num_env_steps_trained.inc(value=int(self._trained_env_steps))
            self._metrics_all_modules_num_module_steps_trained.inc(value=sum(self._trained_steps.values()))
        for module_id, steps in self._trained_steps.items():
            self.metrics.log_value((module_id, WEIGHTS_SEQ_NO), self._weights_seq_no, window=1)
            self.metrics.log_value((module_id, NUM_MODULE_STEPS_TRAINED), steps, reduce="sum")
            self.metrics.log_value(
                (module_id, NUM_MODULE_STEPS_TRAINED_LIFETIME), steps, reduce="lifetime_sum", with_throughput=True
            )
            self.metrics.log_value((ALL_MODULES, NUM_MODULE_STEPS_TRAINED), steps, reduce="sum", with_throughput=True)
            self.metrics.log_value(
                (ALL_MODULES, NUM_MODULE_STEPS_TRAINED_LIFETIME), steps, reduce="lifetime_sum", with_throughput=True
            )
        if self._trained_steps:
            self.metrics.log_value(
                (ALL_MODULES, NUM_ENV_STEPS_TRAINED), self._trained_env_steps, reduce="sum", with_throughput=True
            )
            self.metrics.log_value(
                (ALL_MODULES, NUM_ENV_STEPS_TRAINED_LIFETIME),
                self._trained_env_steps,
                reduce="lifetime_sum",
                with_throughput=True,
            )
        self._trained_steps, self._trained_env_steps = {}, 0

    @override(Learner)
    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        self._log_trained_steps()
        self._log_last_minibatch_metrics()
        super().after_gradient_based_update(timesteps=timesteps)

    def _log_last_minibatch_metrics(self) -> None:
        """Logs the loss metrics and the off-policyness of the update's last minibatch.

        RLlib logs them every SGD step with window=1, so a reduced result holds the last
        step's values only; logging just those, once, gives the same result for less.
        PPOLearner reads the KL from them in after_gradient_based_update, so they come first.
        """
        for module_id, terms in self._last_loss_terms.items():
            self.metrics.log_dict(terms.metrics(), key=module_id, window=1)
        self._last_loss_terms = {}
        if self._last_minibatch is not None:
            super()._compute_off_policyness(self._last_minibatch)
            self._last_minibatch = None
