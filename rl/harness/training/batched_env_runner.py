"""An EnvRunner that steps a vector env in one batched loop and builds RLlib's episodes once per `sample()`.

    from rl.harness.training.batched_env_runner import BatchedEnvRunner

    config.env_runners(env_runner_cls=BatchedEnvRunner)   # configs.configure does it unless --env-runner rllib

RLlib's SingleAgentEnvRunner turns every vectorised step into per-env work: one
`add_env_step` per env, the connector pipelines' per-call timers, four episode callbacks
per env and step. For the main job (32 envs, 2048 env steps a sample) that bookkeeping
and the connector calls took about as long as the envs themselves
(`//experiments/mess3:bench_sampling`, docs/performance.md "Sampling"). This runner keeps
each step's batched arrays (observations, actions, rewards, flags, infos, the module's
outputs, the recurrent state) as they come, and at the end of `sample()` appends each env's
run of steps to its episode in one piece. What it returns is what RLlib's runner returns
on the same seed: the same episodes (ids aside), in the same order, cut the same way, the
same RLlib metrics (`tests/batched_env_runner_test.py` compares them for stateless and
stateful modules, and the Learner's batch built from them).

It serves the harness's fast connector pipelines (sampling_connectors.py): EpisodesToModuleBatch
and ModuleOutputsForVectorEnv, whose work it does on the batched arrays directly, and configs
without episode callbacks (`on_episode_start`, `_step`, `_end`, `_created`), which need a call
per env and step. Other configs, `num_episodes` sampling and random actions run RLlib's own
loop (`why_not_batched` says why). The one private hook is `_sample`, RLlib 2.56's per-call
loop (Ray is pinned); RLlib's episode objects are built through their public methods, plus
the bulk append (`_append_steps`).
"""

from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np
import torch

from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.columns import Columns
from ray.rllib.env.env_runner import ENV_STEP_FAILURE
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer
from ray.rllib.utils.metrics import (
    CONNECTOR_PIPELINE_TIMER,
    CONNECTOR_TIMERS,
    ENV_TO_MODULE_CONNECTOR,
    MODULE_TO_ENV_CONNECTOR,
    RLMODULE_INFERENCE_TIMER,
    TIMERS,
    WEIGHTS_SEQ_NO,
)
from ray.rllib.utils.numpy import convert_to_numpy
from ray.rllib.utils.metrics.utils import to_snake_case

from rl.harness.training.sampling_connectors import (
    EpisodesToModuleBatch,
    ModuleOutputsForVectorEnv,
    as_tensors,
    map_arrays,
    module_batch,
    stacked,
    to_numpy,
)

EPISODE_EVENTS = ("on_episode_created", "on_episode_start", "on_episode_step", "on_episode_end")


def why_not_batched(runner: SingleAgentEnvRunner) -> Optional[str]:
    """Why `runner` must sample with RLlib's loop, or None when the batched loop serves it."""
    if runner.module is None:
        return "the EnvRunner has no RLModule"
    if [type(piece) for piece in runner._env_to_module.connectors] != [EpisodesToModuleBatch]:
        return "the env-to-module pipeline is not the harness's EpisodesToModuleBatch"
    if [type(piece) for piece in runner._module_to_env.connectors] != [ModuleOutputsForVectorEnv]:
        return "the module-to-env pipeline is not the harness's ModuleOutputsForVectorEnv"
    for event in EPISODE_EVENTS:
        if getattr(runner.config, f"callbacks_{event}") or any(
                getattr(type(callback), event) is not getattr(RLlibCallback, event) for callback in runner._callbacks):
            return f"the config has an {event} callback, which needs a call per env and step"
    return None


class BatchedEnvRunner(SingleAgentEnvRunner):
    """RLlib's single-agent EnvRunner with the per-step loop batched over the vector env (module docstring)."""

    def __init__(self, *, config, **kwargs):
        super().__init__(config=config, **kwargs)
        self.fallback = why_not_batched(self)
        self._initial_state = (as_tensors(convert_to_numpy(self.module.get_initial_state()))
                               if self.module is not None and self.module.is_stateful() else None)

    def _sample(self, *, num_timesteps=None, num_episodes=None, explore, random_actions=False, force_reset=False):
        if num_timesteps is None or random_actions or self.fallback:
            return super()._sample(num_timesteps=num_timesteps, num_episodes=num_episodes, explore=explore,
                                   random_actions=random_actions, force_reset=force_reset)
        if force_reset or self._needs_initial_reset:
            self._reset_envs_and_episodes(explore)
        done: list[SingleAgentEpisode] = []
        steps, ts = self._steps(), 0
        while ts < num_timesteps:
            outputs = self._act(explore, ts, steps)
            actions = outputs.pop(Columns.ACTIONS)
            results = self._try_env_step(outputs.pop(Columns.ACTIONS_FOR_ENV, actions))
            if results == ENV_STEP_FAILURE:  # as RLlib: keep the finished episodes, reset, count again
                done += _in_order(self._episodes(steps, keep_ongoing=False)[0])
                self._reset_envs_and_episodes(explore)
                steps, ts = self._steps(), 0
                continue
            ts += steps.add(actions, outputs, results, time.perf_counter())
            self._cached_to_module = self._next_inputs(steps, outputs.get(Columns.STATE_OUT))
            steps.pipeline_seconds[ENV_TO_MODULE_CONNECTOR] += time.perf_counter() - steps.times[-1]
        self._log_pipeline_times(steps)
        finished, ongoing = self._episodes(steps, keep_ongoing=True)
        return self._returned(done + _in_order(finished), ongoing, ts)

    def _steps(self) -> "_Steps":
        # An episode not yet reset (one ended at the last step) gets its reset observation next step.
        return _Steps(np.array([not episode.is_reset for episode in self._ongoing_episodes]))

    def _act(self, explore: bool, ts: int, steps: "_Steps") -> dict[str, Any]:
        """The module's batched outputs for the cached inputs, as numpy (N, ...), with the actions."""
        inputs, self._cached_to_module = self._cached_to_module, None
        with self.metrics.log_time(RLMODULE_INFERENCE_TIMER):
            if explore:  # the step count RLlib passes, for schedules
                runners = self.config.num_env_runners or 1
                outputs = self.module.forward_exploration(
                    inputs, t=(self.num_env_steps_sampled_lifetime // runners + ts) * runners)
            else:
                outputs = self.module.forward_inference(inputs)
        start = time.perf_counter()
        outputs = self._module_to_env.connectors[0].batched(self.module, outputs, self._ongoing_episodes, explore,
                                                             remove_time_rank=self._initial_state is not None,
                                                             numpy=False)
        steps.pipeline_seconds[MODULE_TO_ENV_CONNECTOR] += time.perf_counter() - start
        return outputs

    def _log_pipeline_times(self, steps: "_Steps") -> None:
        """The connector pipelines' timers as RLlib's pipelines log them (seconds a call), once per sample:
        the batched loop does their work without calling them."""
        if not steps.count:
            return
        pieces = {ENV_TO_MODULE_CONNECTOR: EpisodesToModuleBatch, MODULE_TO_ENV_CONNECTOR: ModuleOutputsForVectorEnv}
        for pipeline, piece in pieces.items():
            seconds = steps.pipeline_seconds[pipeline] / steps.count
            for key in ((pipeline, CONNECTOR_PIPELINE_TIMER), (pipeline, TIMERS, CONNECTOR_TIMERS, to_snake_case(piece.__name__))):
                self.metrics.log_value(key, seconds, reduce="ema")

    def _next_inputs(self, steps: "_Steps", state_out: Any) -> dict[str, Any]:
        """EpisodesToModuleBatch's output for the episodes as they stand after the last step, from the arrays."""
        if self._initial_state is None:
            return as_tensors(module_batch(steps.observations[-1]), self._device)
        resets = steps.resets[-1]  # a fresh episode starts from the initial state
        if resets.any():
            rows = torch.from_numpy(resets)
            state_out = _map_leaves(lambda step, initial: torch.where(rows.view(-1, *([1] * initial.dim())), initial, step),
                                    state_out, self._initial_state)
        self._shared_data["_added_single_ts_time_rank"] = True
        return as_tensors(module_batch(steps.observations[-1], state_out), self._device)

    def _episodes(self, steps: "_Steps", *, keep_ongoing: bool):
        """The finished episodes as (step, env, episode), and (if kept) the ongoing ones in env order."""
        finished, ongoing = [], []
        if not steps.count:
            return finished, list(self._ongoing_episodes) if keep_ongoing else []
        columns = steps.stacked()
        seq_no = self._weights_seq_no
        for env, episode in enumerate(self._ongoing_episodes):
            start = None
            for step in range(steps.count):
                if columns.resets[step, env]:
                    episode.add_env_reset(observation=_row(columns.observations, step, env),
                                          infos=steps.infos[step][env])
                    episode._start_time = steps.times[step]  # when the env reset, not now
                    continue
                start = step if start is None else start
                if columns.dones[step, env]:
                    _append_steps(episode, columns, steps, env, start, step + 1, seq_no)
                    finished.append((step, env, episode))
                    episode = SingleAgentEpisode(observation_space=self.env.single_observation_space,
                                                 action_space=self.env.single_action_space)
                    start = None
            if start is not None:
                _append_steps(episode, columns, steps, env, start, steps.count, seq_no)
            self._ongoing_episodes[env] = episode
            ongoing.append(episode)
        return finished, ongoing if keep_ongoing else []

    def _returned(self, done: list, ongoing: list, ts: int) -> list:
        """RLlib's end of `_sample`: cut the ongoing episodes, record them for metrics, count the steps."""
        self._ongoing_episodes = [episode.cut(len_lookback_buffer=self.config.episode_lookback_horizon)
                                  for episode in ongoing]
        chunks = []
        for episode in ongoing:
            if episode.t == 0:
                continue
            episode.validate()
            self._ongoing_episodes_for_metrics[episode.id_].append(episode)
            chunks.append(episode)
        self._done_episodes_for_metrics.extend(done)
        samples = done + chunks
        if self.episodes_to_numpy:
            samples = [episode.to_numpy() for episode in samples]
        self._log_env_steps(metric=self._metrics_num_env_steps_sampled, num_steps=ts)
        self._increase_sampled_metrics(ts, len(done))
        return samples


class _Steps:
    """Each vectorised step's arrays as they came, and per env whether it reset or ended there."""

    def __init__(self, pending: np.ndarray):
        self.observations, self.actions, self.rewards, self.infos, self.outputs = [], [], [], [], []
        self.terminateds, self.truncateds, self.resets, self.dones, self.times = [], [], [], [], []
        self.pending = pending  # envs whose next step is a reset
        self.pipeline_seconds = {ENV_TO_MODULE_CONNECTOR: 0.0, MODULE_TO_ENV_CONNECTOR: 0.0}

    @property
    def count(self) -> int:
        return len(self.times)

    def add(self, actions, outputs: dict, results, now: float) -> int:
        """Records one step; returns how many envs stepped (a reset is not a step, as in RLlib)."""
        observations, rewards, terminateds, truncateds, infos = results
        resets = self.pending
        dones = ~resets & (terminateds | truncateds)
        for column, value in ((self.observations, observations), (self.actions, actions), (self.rewards, rewards),
                              (self.infos, infos), (self.outputs, outputs), (self.terminateds, terminateds),
                              (self.truncateds, truncateds), (self.resets, resets), (self.dones, dones),
                              (self.times, now)):
            column.append(value)
        self.pending = dones
        return int(len(rewards) - resets.sum())

    def stacked(self) -> "_Columns":
        return _Columns(stacked(self.observations), stacked(self.actions), np.stack(self.rewards),
                        map_arrays(to_numpy, _stacked_tensors(self.outputs)), np.stack(self.terminateds),
                        np.stack(self.truncateds),
                        np.stack(self.resets), np.stack(self.dones))


class _Columns:
    """`_Steps` stacked: every array (steps, envs, ...)."""

    def __init__(self, observations, actions, rewards, outputs, terminateds, truncateds, resets, dones):
        self.observations, self.actions, self.rewards, self.outputs = observations, actions, rewards, outputs
        self.terminateds, self.truncateds, self.resets, self.dones = terminateds, truncateds, resets, dones


def _append_steps(episode: SingleAgentEpisode, columns: _Columns, steps: _Steps, env: int, start: int, stop: int,
                  seq_no: int) -> None:
    """`episode.add_env_step` for env `env`'s steps start..stop-1, in one piece per buffer.

    The same data as step by step (RLlib's runner): row views of the step arrays, each reward
    the vector env's scalar, each step's info dict, WEIGHTS_SEQ_NO in every step's model outputs.
    """
    count = stop - start
    episode.observations.data.extend(_rows(columns.observations, start, stop, env))
    episode.actions.data.extend(_rows(columns.actions, start, stop, env))
    episode.rewards.data.extend(list(columns.rewards[start:stop, env]))
    episode.infos.data.extend(steps.infos[step][env] for step in range(start, stop))
    extra = {column: _rows(data, start, stop, env) for column, data in columns.outputs.items()}
    extra[WEIGHTS_SEQ_NO] = [seq_no] * count
    for column, rows in extra.items():
        if column in episode.extra_model_outputs:
            episode.extra_model_outputs[column].data.extend(rows)
        else:
            episode.extra_model_outputs[column] = InfiniteLookbackBuffer(rows)
    episode.t += count
    episode.is_terminated = bool(columns.terminateds[stop - 1, env])
    episode.is_truncated = bool(columns.truncateds[stop - 1, env])
    # What add_env_step keeps: the last observation and infos, and when the chunk's steps came.
    episode._last_added_observation = episode.observations.data[-1]
    episode._last_added_infos = episode.infos.data[-1]
    episode._last_step_time = steps.times[stop - 1]
    if episode._start_time is None:
        episode._start_time = steps.times[start]
    episode.validate()


def _stacked_tensors(structures: list) -> Any:
    """Per-step nests of (N, ...) tensors stacked into one nest of (steps, N, ...) tensors."""
    first = structures[0]
    if isinstance(first, dict):
        return {key: _stacked_tensors([structure[key] for structure in structures]) for key in first}
    if isinstance(first, tuple):
        return tuple(_stacked_tensors(list(column)) for column in zip(*structures))
    return torch.stack(structures)


def _in_order(finished: list) -> list:
    """The finished episodes as RLlib's loop returns them: by the step they ended at, then by env."""
    return [episode for *_, episode in sorted(finished, key=lambda item: item[:2])]


def _row(data: Any, step: int, env: int) -> Any:
    if isinstance(data, dict):
        return {key: _row(value, step, env) for key, value in data.items()}
    if isinstance(data, tuple):
        return tuple(_row(value, step, env) for value in data)
    return data[step, env]


def _rows(data: Any, start: int, stop: int, env: int) -> list:
    """Env `env`'s rows of steps start..stop-1 of a (steps, envs, ...) nest, each row a nest of views."""
    if isinstance(data, dict):
        keys = list(data)
        return [dict(zip(keys, values)) for values in zip(*(_rows(data[key], start, stop, env) for key in keys))]
    if isinstance(data, tuple):
        return [tuple(values) for values in zip(*(_rows(value, start, stop, env) for value in data))]
    return list(data[start:stop, env])


def _map_leaves(function, data: Any, other: Any) -> Any:
    if isinstance(data, dict):
        return {key: _map_leaves(function, value, other[key]) for key, value in data.items()}
    return function(data, other)
