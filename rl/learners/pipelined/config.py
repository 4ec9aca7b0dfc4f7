"""PipelinedPPO: PPO whose remote EnvRunners sample the next batch while the Learner updates on this one.

    from rl.learners.pipelined import PipelinedPPOConfig

    config = PipelinedPPOConfig().environment("CartPole-v1").env_runners(num_env_runners=1)
    algo = config.build_algo()
    algo.train()["pipelined/policy_lag"]       # 0 in the first iteration, 1 after

RLlib's PPO samples, then updates, then sends the updated weights: on two cores one of them idles
at any time. Here each iteration collects the batch in flight, at once asks the EnvRunners for
the next one (carrying the Learner's weights in the same request), and updates on the collected
batch while they sample. The batch an update trains on was therefore sampled with the weights
one update older than the Learner's (the first iteration's with the same weights): the policy lag
is one update, never more (`policy_lag` reads it from the weights number every sampled step
carries, and the iteration fails if it exceeds one). A runner whose process dies while sampling
is restarted by RLlib (`restart_failed_env_runners`) and samples its batch again with the
Learner's weights (a lag of 0 for that part); where it may not or cannot be restarted, the
iteration fails with one line naming `--resume-from`, as it does when a runner that is alive sends
no batch within the config's `sample_timeout_s`. Such a runner (an env step that never returns, a
frozen process) is killed first: RLlib's `stop()` calls every runner, and its call would queue
behind the batch for good.

The lag is corrected by PPO's own ratio: the loss compares the Learner's policy with the logp
each step was sampled with (`Columns.ACTION_LOGP`), clipped, and its KL term is taken against
the policy the update starts from (ActorCriticPPOTorchLearner recomputes those logits once per
update when the config is pipelined): against the behaviour policy it would count the previous
update's move too, and the adaptive KL coefficient grows on it and holds early learning back
(measured: docs/performance.md, "Pipelined PPO"). The value targets carry no lag: the critic
embeddings sampled with the older weights are dropped from the episodes, so GAE encodes the batch
with the Learner's (`advantages.batch_values`). The runners send only the recurrent states the
Learner reads, the chunk starts' (`connectors.keep_chunk_start_states`): the main job's batch
crosses processes as 1.5 MiB instead of 16.8; and of the steps' infos only the keys the
Learner class's `batch_info_keys()` names (none for PPO: pickling Mess3's infos took 9 of the
runner's 11.5 ms a batch and unpickling them 4 of the driver's 4.8). docs/performance.md says why this correction and
not V-trace.

Results repeat: each runner's batch k+1 is sampled with the weights update k starts from, whatever
the timing (one request per runner in flight, collected in runner order), so a seed gives the same run on the
same platform; it is a different run from PPO's sequential one (the batches come from other
weights), and a run in which a runner was restarted is not a repeat of one without. Connector
states are not merged or broadcast between iterations (a blocking call to runners that are
sampling); the harness's connectors hold none. The config's `pipelined` attribute
tells the harness to place the envs in remote EnvRunners (`hardware.place_envs`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.ppo import PPO, PPOConfig
from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_MODULE_STEPS_TRAINED_LIFETIME,
    TIMERS,
    WEIGHTS_SEQ_NO,
)

from rl.learners.connectors import keep_chunk_start_states
from rl.learners.models.base import CRITIC_EMBEDDINGS

# Updates between the weights that sampled an update's batch and the Learner's: a metric of every iteration.
POLICY_LAG = "pipelined/policy_lag"
MAX_POLICY_LAG = 1
_SAMPLE_TAG = "pipelined_sample"
# A runner that Ray is still restarting fails RLlib's probe at once: probing once a second waits without spinning.
_RESTART_PROBE_INTERVAL_S = 1.0


def policy_lag(learner_weights: int, episodes: Sequence[Any]) -> int:
    """Updates between the oldest weights that sampled a step of `episodes` and the Learner's (`learner_weights`).

    Every EnvRunner step records the weights number (`WEIGHTS_SEQ_NO`) it was sampled with.

    Example:
        policy_lag(learner.get_state()[WEIGHTS_SEQ_NO], episodes)    # 1 for a pipelined batch
    """
    sampled = [np.min(episode.get_extra_model_outputs(WEIGHTS_SEQ_NO)) for episode in episodes if len(episode)]
    if not sampled:
        raise ValueError("no episode holds a sampled step: nothing to read the sampling weights from")
    return int(learner_weights - min(sampled))


def trim_for_learner(rl_module: Any, episodes: list, *, info_keys: frozenset[str] | None = None) -> None:
    """Drops from a pipelined batch, in place, what its Learner does not read, before it crosses to the driver.

    The per-step recurrent states but the chunk starts' (`keep_chunk_start_states`; most of a
    Transformer's batch), the critic embeddings, sampled with the older weights (GAE encodes
    the batch with the Learner's), and every key of the steps' infos but `info_keys` (the
    Learner class's `batch_info_keys()`; None keeps them all). Infos are dicts per step, often
    of small arrays: most of the time it takes to pickle and unpickle a batch.

    Example:
        trim_for_learner(env_runner.module, episodes, info_keys=frozenset())  # on the remote EnvRunner
    """
    for episode in episodes:
        episode.extra_model_outputs.pop(CRITIC_EMBEDDINGS, None)
        if info_keys is not None:
            episode.infos.data = [{key: info[key] for key in info_keys if key in info} for info in episode.infos.data]
    keep_chunk_start_states(rl_module, episodes)


def learner_info_keys(config: Any) -> frozenset[str] | None:
    """The info keys the batch of `config`'s Learner reads (its class's `batch_info_keys()`), or None: all."""
    read = getattr(config.learner_class, "batch_info_keys", None)
    return None if read is None else read()


def _sample_with(env_runner, *, weights: dict) -> tuple[list, dict]:
    """On a remote EnvRunner: take `weights`, sample one batch, return it (trimmed) with the runner's metrics."""
    env_runner.set_state(weights)
    episodes = env_runner.sample()
    trim_for_learner(env_runner.module, episodes, info_keys=learner_info_keys(env_runner.config))
    return episodes, env_runner.get_metrics()


def _own_handle(env_runner) -> tuple[int, Any]:
    """On a remote EnvRunner: its index and the handle of its own actor (to kill it once it stops answering)."""
    return env_runner.worker_index, ray.get_runtime_context().current_actor


def _lost_runners_message(problem: str) -> str:
    """One line: the lost EnvRunners' `problem`, and how to continue the run."""
    return f"{problem}: continue the run from its last checkpoint (rl-harness --resume-from <run id or checkpoint>)"


_RESTARTS_OFF = (
    "and restart_failed_env_runners is off (.fault_tolerance(restart_failed_env_runners=True) restarts them)"
)


class PipelinedPPOConfig(PPOConfig):
    """PPOConfig for PipelinedPPO (module docstring); `pipelined` tells the harness to sample in remote EnvRunners."""

    pipelined = True

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or PipelinedPPO)
        # Merging or broadcasting connector states after an iteration calls the runners and
        # would wait for the batch they are sampling.
        self.merge_env_runner_states = False
        self.broadcast_env_runner_states = False


class PipelinedPPO(PPO):
    """PPO with sampling of the next batch overlapping the update on this one (module docstring)."""

    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> PipelinedPPOConfig:
        return PipelinedPPOConfig()

    @override(Algorithm)
    def setup(self, config) -> None:
        super().setup(config)
        if self.env_runner_group is None or self.env_runner_group.num_remote_workers() < 1:
            raise ValueError(
                "PipelinedPPO samples in remote EnvRunners while its Learner updates: set "
                "num_env_runners >= 1 (the harness does for a config whose `pipelined` is True)"
            )
        self._runners = sorted(self.env_runner_group.healthy_env_runner_ids())
        self._batch_in_flight = False
        # Taken now: a runner stuck in its batch answers no call, not even one for its handle.
        self._handles = {}
        self._take_handles(self._runners)

    def _take_handles(self, runners: list[int]) -> None:
        """Keeps each of `runners`' actor handle, by index (asked of the runner, so while it answers)."""
        self._handles |= dict(
            self.env_runner_group.foreach_env_runner(_own_handle, local_env_runner=False, remote_worker_ids=runners)
        )

    def _learner_weights(self) -> dict:
        """The Learner's module weights (inference only) and their number, as an EnvRunner's `set_state` takes them."""
        state = self.learner_group.get_state(
            components=f"{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}", inference_only=True
        )[COMPONENT_LEARNER]
        return {COMPONENT_RL_MODULE: ray.put(state[COMPONENT_RL_MODULE]), WEIGHTS_SEQ_NO: state[WEIGHTS_SEQ_NO]}

    def _request_batch(self, weights: dict, runners: list[int]) -> None:
        sent = self.env_runner_group.foreach_env_runner_async(
            _sample_with, tag=_SAMPLE_TAG, kwargs={"weights": weights}, remote_worker_ids=runners
        )
        if sent != len(runners):
            raise RuntimeError(
                f"{len(runners) - sent} of {len(runners)} EnvRunners refused a sample request (one already in flight)"
            )
        self._batch_in_flight = True

    def _fetch_batches(self, runners: list[int]) -> dict[int, tuple[list, dict]]:
        """Waits up to `sample_timeout_s` for the batches in flight from `runners`; each returning runner's episodes
        and metrics, by runner id. One of `runners` that is alive but sent none by then fails the iteration in one
        line."""
        timeout = self.config.sample_timeout_s
        try:
            batches = dict(self.env_runner_group.fetch_ready_async_reqs(tags=_SAMPLE_TAG, timeout_seconds=timeout))
        except RayActorError as error:  # RLlib raises a lost runner's error only when it may not restart the runner
            self._kill(runners)  # the run ends: none of them may still be stuck in its batch
            raise RuntimeError(_lost_runners_message(f"an EnvRunner died while sampling {_RESTARTS_OFF}")) from error
        finally:
            self._batch_in_flight = False
        alive = set(self.env_runner_group.healthy_env_runner_ids())
        if silent := [runner for runner in runners if runner not in batches and runner in alive]:
            self._kill(silent)
            # Ray's own word for a result that did not come in time, as the cause.
            raise RuntimeError(
                _lost_runners_message(
                    f"EnvRunners {silent} sent no batch within sample_timeout_s={timeout} s (an env that hangs, "
                    "or a batch slower to sample than that: .env_runners(sample_timeout_s=...) allows longer)"
                )
            ) from GetTimeoutError(f"no batch from EnvRunners {silent} within {timeout} s")
        return batches

    def _kill(self, runners: list[int]) -> None:
        """Kills `runners`' actors before the iteration fails: one stuck in its batch would hold up RLlib's
        `stop()`, whose call to it queues behind the batch. A runner whose handle was never taken (it failed
        while the algorithm was set up) is left to RLlib."""
        for runner in runners:
            if (handle := self._handles.get(runner)) is not None:
                ray.kill(handle, no_restart=True)

    def _restore(self, lost: list[int]) -> None:
        """Has RLlib restore the runners `lost` (restarted by Ray) and sync them, as it does before an iteration.

        Waits up to `env_runner_health_probe_timeout_s` for Ray to restart them.
        """
        if not self.config.restart_failed_env_runners:
            raise RuntimeError(_lost_runners_message(f"EnvRunners {lost} died while sampling {_RESTARTS_OFF}"))
        deadline = time.monotonic() + self.config.env_runner_health_probe_timeout_s
        restored = self.restore_env_runners(self.env_runner_group)
        while unrestored := sorted(set(lost) - set(restored)):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    _lost_runners_message(
                        f"EnvRunners {unrestored} died while sampling and RLlib could not restart them "
                        "(max_num_env_runner_restarts reached, or not back within env_runner_health_probe_timeout_s)"
                    )
                )
            time.sleep(_RESTART_PROBE_INTERVAL_S)
            restored += self.restore_env_runners(self.env_runner_group)
        # RLlib's private method, called as its own training loop calls it after a restore (the one
        # private call here; pipelined_test checks the callback fires).
        self._make_on_env_runners_recreated_callbacks(
            config=self.config, env_runner_group=self.env_runner_group, restored_env_runner_indices=restored
        )
        self._take_handles(restored)  # Ray restarts an actor under its handle; this also takes one setup missed

    def _collect_batch(self) -> tuple[list, list]:
        """Waits for every runner's batch in flight; its episodes and metrics in runner order.

        A runner whose process died is restarted and samples its batch again with the Learner's
        current weights (a lag of 0 for that part), until every runner has returned one.
        """
        batches = self._fetch_batches(self._runners)
        while lost := [runner for runner in self._runners if runner not in batches]:
            self._restore(lost)
            self._request_batch(self._learner_weights(), lost)
            batches |= self._fetch_batches(lost)
        in_runner_order = [batches[runner] for runner in self._runners]
        episodes = [episode for batch, _ in in_runner_order for episode in batch]
        return episodes, [metrics for _, metrics in in_runner_order]

    @override(PPO)
    def training_step(self) -> None:
        if not self._batch_in_flight:  # the first iteration (or the first after a restore)
            self._request_batch(self._learner_weights(), self._runners)
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            episodes, env_runner_results = self._collect_batch()
            self.metrics.aggregate(env_runner_results, key=ENV_RUNNER_RESULTS)
        weights = self._learner_weights()
        lag = policy_lag(weights[WEIGHTS_SEQ_NO], episodes)
        if lag > MAX_POLICY_LAG:
            raise RuntimeError(f"a batch was sampled with weights {lag} updates old (the bound is {MAX_POLICY_LAG})")
        self.metrics.log_value(POLICY_LAG, lag, window=1)
        self._request_batch(weights, self._runners)  # the next batch samples while the Learner updates on this one
        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            learner_results = self.learner_group.update(
                episodes=episodes,
                timesteps={
                    NUM_ENV_STEPS_SAMPLED_LIFETIME: self.metrics.peek(
                        (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME)
                    ),
                    NUM_MODULE_STEPS_TRAINED_LIFETIME: self.metrics.peek(
                        (LEARNER_RESULTS, ALL_MODULES, NUM_MODULE_STEPS_TRAINED_LIFETIME), default=0
                    ),
                },
                num_epochs=self.config.num_epochs,
                minibatch_size=self.config.minibatch_size,
                shuffle_batch_per_epoch=self.config.shuffle_batch_per_epoch,
            )
            self.metrics.aggregate(learner_results, key=LEARNER_RESULTS)
