"""An EnvRunner that steps a vector env in one batched loop and builds RLlib's episodes once per `sample()`.

    from rl.harness.training.batched_env_runner import BatchedEnvRunner

    config.env_runners(env_runner_cls=BatchedEnvRunner)   # configs.prepare does it unless --env-runner rllib

RLlib's SingleAgentEnvRunner turns every vectorised step into per-env work: one
`add_env_step` per env, the connector pipelines' per-call timers, four episode callbacks
per env and step, and its vector env merges the envs' info dicts into arrays that a
wrapper splits again. For the main job (32 envs, 2048 env steps a sample) that took about
as long as the envs themselves (`//experiments/mess3:bench_sampling`, docs/performance.md
"Sampling"). This runner keeps each step's batched arrays (observations, actions,
rewards, flags, infos, the module's outputs and recurrent state) as they come, steps the
vector env's envs itself (`ListInfoVectorEnv`: the same autoreset, each env's own info
dict), and at the end of `sample()` turns each env's run of steps into RLlib's episode at
once, as numpy buffers (views of the stacked steps). What it returns is what RLlib's runner
returns on the same seed: the same episodes (ids aside), in the same order, cut the same
way, and the same RLlib metrics (`tests/batched_env_runner_test.py` compares them, and the
Learner's batch built from them).

It serves the harness's fast connector pipelines (sampling_connectors.py: EpisodesToModuleBatch
and ModuleOutputsForVectorEnv, whose work it does on the batched arrays directly) and configs
without episode callbacks (`on_episode_start`, `_step`, `_end`, `_created`), which need a call
per env and step. Other configs, `num_episodes` sampling and random actions run RLlib's own
loop (`why_not_batched` says why). It overrides RLlib 2.56's private `_sample` and uses that
runner's own state and helpers (`_ongoing_episodes`, `_cached_to_module`, `_reset_envs_and_episodes`,
`_try_env_step`, the metrics counters) and an episode's step times (`_chunk`); Ray is pinned, and
the tests above fail if any of it changes.

Where the config's Learner reads a stateful module's recurrent state only at chunk starts (its
class names a `store_chunk_start_states` function, as `rl.learners.ActorCriticPPOTorchLearner`
does), the runner keeps only those states while it samples: the STATE_OUT of each episode's
every `max_seq_len`-th step and, for the episodes it cuts, the last one, which RLlib's cut keeps
as look-back. The episodes then carry no per-step STATE_OUT (the main job's: 16 MiB of keys and
values a sample, stacked and copied) but what that function stores for the Learner, which builds
the same batch from it (`tests/batched_env_runner_test.py`).
"""

from __future__ import annotations

import functools
import gc
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector.utils import concatenate, create_empty_array, iterate
from gymnasium.wrappers.vector import DictInfoToList
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.columns import Columns
from ray.rllib.env.env_runner import ENV_STEP_FAILURE
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer
from ray.rllib.utils.annotations import override
from ray.rllib.utils.metrics import (
    CONNECTOR_PIPELINE_TIMER,
    CONNECTOR_TIMERS,
    ENV_TO_MODULE_CONNECTOR,
    ENV_TO_MODULE_SUM_EPISODES_LENGTH_IN,
    ENV_TO_MODULE_SUM_EPISODES_LENGTH_OUT,
    MODULE_TO_ENV_CONNECTOR,
    RLMODULE_INFERENCE_TIMER,
    TIMERS,
    WEIGHTS_SEQ_NO,
)
from ray.rllib.utils.metrics.utils import to_snake_case
from ray.rllib.utils.numpy import convert_to_numpy
from ray.rllib.utils.spaces.space_utils import batch as batch_items

from rl.harness.training import hardware, torch_seeding
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


def why_not_batched(runner: SingleAgentEnvRunner) -> str | None:
    """Why `runner` must sample with RLlib's loop, or None when the batched loop serves it."""
    if runner.module is None:
        return "the EnvRunner has no RLModule"
    if [type(piece) for piece in runner._env_to_module.connectors] != [EpisodesToModuleBatch]:
        return "the env-to-module pipeline is not the harness's EpisodesToModuleBatch"
    if [type(piece) for piece in runner._module_to_env.connectors] != [ModuleOutputsForVectorEnv]:
        return "the module-to-env pipeline is not the harness's ModuleOutputsForVectorEnv"
    for event in EPISODE_EVENTS:
        if getattr(runner.config, f"callbacks_{event}") or any(
            getattr(type(callback), event) is not getattr(RLlibCallback, event) for callback in runner._callbacks
        ):
            return f"the config has an {event} callback, which needs a call per env and step"
    return None


class BatchedEnvRunner(SingleAgentEnvRunner):
    """RLlib's single-agent EnvRunner with the per-step loop batched over the vector env (module docstring)."""

    def __init__(self, *, config, **kwargs):
        with torch_seeding.without_compiler_import():  # ~66 MiB and ~1 s less in a remote runner's process
            super().__init__(config=config, **kwargs)
        hardware.skip_uninitialized_fill(torch)  # this process may be a remote runner's or a Tune trial's
        self.fallback = why_not_batched(self)
        self._env_step_calls: int | None = None  # counted while the batched loop runs (`_log_env_steps`)
        self._initial_state = (
            as_tensors(convert_to_numpy(self.module.get_initial_state()))
            if self.module is not None and self.module.is_stateful()
            else None
        )
        self._store_chunk_start_states = chunk_start_states_store(config) if self._initial_state is not None else None
        # The chunk length where only the chunk starts' recurrent states are kept.
        self._chunk_length = self.module.model_config["max_seq_len"] if self._store_chunk_start_states else None
        # Episodes of the current sample() and the chunk starts' states to store in each once it is cut.
        self._chunk_start_states: list[tuple[SingleAgentEpisode, dict[str, Any]]] = []
        if self.worker_index:  # 1, 2, ...: a remote runner (the local one has 0, or none when built by hand)
            # A remote runner's process holds its imports and module for as long as it lives: frozen, a full
            # collection walks only what sampling makes, not ~0.2 s of them every ~20 samples while the
            # Learner waits for the batch (docs/performance.md, "Pipelined PPO").
            gc.collect()
            gc.freeze()

    @override(SingleAgentEnvRunner)
    def make_env(self) -> None:
        super().make_env()
        if self.env is not None and ListInfoVectorEnv.serves(self.env):
            self.env = ListInfoVectorEnv(self.env)

    def _sample(self, *, num_timesteps=None, num_episodes=None, explore, random_actions=False, force_reset=False):
        if num_timesteps is None or random_actions or self.fallback:
            return super()._sample(
                num_timesteps=num_timesteps,
                num_episodes=num_episodes,
                explore=explore,
                random_actions=random_actions,
                force_reset=force_reset,
            )
        if force_reset or self._needs_initial_reset:
            self._reset_envs_and_episodes(explore)
        self._env_step_calls = 0
        try:
            return self._batched_sample(num_timesteps, explore)
        finally:
            calls, self._env_step_calls = self._env_step_calls, None
            self._chunk_start_states = []
            if calls:
                super()._log_env_steps(metric=self._metrics_num_try_env_step, num_steps=calls)

    @override(SingleAgentEnvRunner)
    def _log_env_steps(self, metric, num_steps: int) -> None:
        # RLlib's _try_env_step adds each vector step to Ray's Prometheus counter of env.step() calls, a call
        # into Ray's metrics per step (~24 us in a training run, 2026-12-06); the batched loop counts
        # its steps and adds them once a sample: the same count.
        if metric is self._metrics_num_try_env_step and self._env_step_calls is not None:
            self._env_step_calls += num_steps
            return
        super()._log_env_steps(metric=metric, num_steps=num_steps)

    def _batched_sample(self, num_timesteps: int, explore: bool) -> list[SingleAgentEpisode]:
        """`_sample`'s batched loop: step the vector env until `num_timesteps`, then build the episodes."""
        done: list[SingleAgentEpisode] = []
        steps, ts = self._steps(), 0
        while ts < num_timesteps:
            outputs = self._act(explore, ts, steps)
            actions = outputs.pop(Columns.ACTIONS)
            results = self._try_env_step(outputs.pop(Columns.ACTIONS_FOR_ENV, actions))
            if results == ENV_STEP_FAILURE:  # as RLlib: keep the finished episodes, reset, count again
                done += _in_order(self._episodes(steps)[0])  # the unfinished ones are dropped, as in RLlib
                self._reset_envs_and_episodes(explore)
                steps, ts = self._steps(), 0
                continue
            ts += steps.add(actions, outputs, results, time.perf_counter())
            self._cached_to_module = self._next_inputs(steps, outputs.get(Columns.STATE_OUT))
            steps.pipeline_seconds[ENV_TO_MODULE_CONNECTOR] += time.perf_counter() - steps.times[-1]
            for key in (ENV_TO_MODULE_SUM_EPISODES_LENGTH_IN, ENV_TO_MODULE_SUM_EPISODES_LENGTH_OUT):
                self.metrics.log_value(key, int(steps.lengths.sum()))  # as RLlib's env-to-module pipeline, per step
        self._log_pipeline_times(steps)
        finished, ongoing = self._episodes(steps)
        return self._returned(done + _in_order(finished), ongoing, ts, steps)

    def _steps(self) -> _Steps:
        # An episode not yet reset (one ended at the last step) gets its reset observation next step.
        return _Steps(
            np.array([not episode.is_reset for episode in self._ongoing_episodes]),
            np.array([len(episode) for episode in self._ongoing_episodes]),
            self._chunk_length,
        )

    def _act(self, explore: bool, ts: int, steps: _Steps) -> dict[str, Any]:
        """The module's batched outputs (N, ...) for the cached inputs: the actions as numpy for the env, the rest
        as the module's tensors until the end of the call (`_Steps.stacked`)."""
        inputs, self._cached_to_module = self._cached_to_module, None
        with self.metrics.log_time(RLMODULE_INFERENCE_TIMER):
            if explore:  # the step count RLlib passes, for schedules
                runners = self.config.num_env_runners or 1
                outputs = self.module.forward_exploration(
                    inputs, t=(self.num_env_steps_sampled_lifetime // runners + ts) * runners
                )
            else:
                outputs = self.module.forward_inference(inputs)
        start = time.perf_counter()
        outputs = self._module_to_env.connectors[0].batched(
            self.module,
            outputs,
            self._ongoing_episodes,
            explore,
            remove_time_rank=self._initial_state is not None,
            numpy=False,
        )
        steps.pipeline_seconds[MODULE_TO_ENV_CONNECTOR] += time.perf_counter() - start
        return outputs

    def _log_pipeline_times(self, steps: _Steps) -> None:
        """The connector pipelines' timers as RLlib's pipelines log them (seconds a call), once per sample:
        the batched loop does their work without calling them."""
        if not steps.count:
            return
        pieces = {ENV_TO_MODULE_CONNECTOR: EpisodesToModuleBatch, MODULE_TO_ENV_CONNECTOR: ModuleOutputsForVectorEnv}
        for pipeline, piece in pieces.items():
            seconds = steps.pipeline_seconds[pipeline] / steps.count
            for key in (
                (pipeline, CONNECTOR_PIPELINE_TIMER),
                (pipeline, TIMERS, CONNECTOR_TIMERS, to_snake_case(piece.__name__)),
            ):
                self.metrics.log_value(key, seconds, reduce="ema")

    def _next_inputs(self, steps: _Steps, state_out: Any) -> dict[str, Any]:
        """EpisodesToModuleBatch's output for the episodes as they stand after the last step, from the arrays."""
        if self._initial_state is None:
            return as_tensors(module_batch(steps.observations[-1]), self._device)
        resets = steps.resets[-1]  # a fresh episode starts from the initial state
        if resets.any():
            rows = torch.from_numpy(resets)
            state_out = _leafwise(
                lambda leaves: torch.where(rows.view(-1, *([1] * leaves[1].dim())), leaves[1], leaves[0]),
                [state_out, self._initial_state],
            )
        self._shared_data["_added_single_ts_time_rank"] = True
        return as_tensors(module_batch(steps.observations[-1], state_out), self._device)

    def _episodes(self, steps: _Steps):
        """The finished episodes as (step, env, episode), and the ongoing ones in env order."""
        finished, ongoing = [], []
        if not steps.count:
            return finished, list(self._ongoing_episodes)
        columns = steps.stacked()
        for env, episode in enumerate(self._ongoing_episodes):
            start = reset = None  # where the current episode's steps begin; where it was reset in this call
            for step in range(steps.count):
                if columns.resets[step, env]:
                    reset = step
                    continue
                start = step if start is None else start
                if columns.dones[step, env]:
                    finished.append((step, env, self._chunk(episode, columns, steps, env, reset, start, step + 1)))
                    episode, start, reset = None, None, None
            if start is not None or reset is not None:
                episode = self._chunk(episode, columns, steps, env, reset, start, steps.count)
            elif episode is None:  # it ended at the last step: the next step resets the env
                episode = SingleAgentEpisode(
                    observation_space=self.env.single_observation_space, action_space=self.env.single_action_space
                )
            self._ongoing_episodes[env] = episode
            ongoing.append(episode)
        return finished, ongoing

    def _chunk(
        self,
        episode: SingleAgentEpisode | None,
        columns: _Columns,
        steps: _Steps,
        env: int,
        reset: int | None,
        start: int | None,
        stop: int,
    ) -> SingleAgentEpisode:
        """A numpy episode: `episode` (None: a new one, reset at step `reset`) with env `env`'s steps start..stop-1.

        The episode RLlib's loop builds step by step (`to_numpy()`'d): the same id, start, lookback,
        data (views of the step arrays, joined to what the episode held), flags and step times.
        """
        start = stop if start is None else start  # no step yet: only the reset
        if reset is not None:  # the episode RLlib made when the last one ended (None: it ended in this call)
            if episode is None:
                episode = SingleAgentEpisode(
                    observation_space=self.env.single_observation_space, action_space=self.env.single_action_space
                )
            first = {
                "observations": _steps_of(columns.observations, reset, reset + 1, env),
                "infos": [steps.infos[reset][env]],
            }
            started = steps.times[reset]
        else:
            first, started = {}, episode._start_time
        new = {
            "observations": _steps_of(columns.observations, start, stop, env),
            "infos": [steps.infos[step][env] for step in range(start, stop)],
            "actions": _steps_of(columns.actions, start, stop, env),
            "rewards": columns.rewards[start:stop, env],
            **{column: _steps_of(data, start, stop, env) for column, data in columns.outputs.items()},
            WEIGHTS_SEQ_NO: np.full(stop - start, self._weights_seq_no),
        }
        extra = {
            column: _joined(episode.extra_model_outputs.get(column), data)
            for column, data in new.items()
            if column not in _EPISODE_COLUMNS and stop > start
        }
        held = episode.extra_model_outputs
        if steps.chunk_length is not None:  # the look-back state the last cut kept is the chunk's, not a step's
            held = {column: buffer for column, buffer in held.items() if column != Columns.STATE_OUT}
        chunk = SingleAgentEpisode(
            episode.id_,
            observations=_joined(episode.observations, first.get("observations"), new["observations"]),
            infos=InfiniteLookbackBuffer(
                list(episode.infos.data) + first.get("infos", []) + new["infos"], lookback=episode.infos.lookback
            ),
            actions=_joined(episode.actions, new["actions"]),
            rewards=_joined(episode.rewards, new["rewards"]),
            extra_model_outputs={**held, **extra},
            terminated=bool(columns.terminateds[stop - 1, env]) if stop > start else False,
            truncated=bool(columns.truncateds[stop - 1, env]) if stop > start else False,
            t_started=episode.t_started,
            observation_space=episode.observation_space,
            action_space=episode.action_space,
        )
        # What RLlib's episode keeps of its steps: when they came, the last observation and infos.
        chunk._custom_data = episode._custom_data
        chunk._start_time = started if started is not None else steps.times[start]
        chunk._last_step_time = steps.times[stop - 1] if stop > start else episode._last_step_time
        chunk._last_added_observation = chunk.get_observations(-1)
        chunk._last_added_infos = chunk.infos.data[-1]
        if steps.chunk_length is not None and stop > start:
            self._chunk_start_states.append(
                (chunk, _chunk_start_states(episode, columns, steps.chunk_length, env, reset, start, stop))
            )
        return chunk

    def _returned(self, done: list, ongoing: list, ts: int, steps: _Steps) -> list:
        """RLlib's end of `_sample`: cut the ongoing episodes, record them for metrics, count the steps."""
        self._ongoing_episodes = [
            episode.cut(len_lookback_buffer=self.config.episode_lookback_horizon) for episode in ongoing
        ]
        if steps.chunk_length is not None:
            self._keep_look_back_states(ongoing, steps)
        chunks = []
        for episode in ongoing:
            if episode.t == 0:
                continue
            episode.validate()
            self._ongoing_episodes_for_metrics[episode.id_].append(episode)
            chunks.append(episode)
        self._done_episodes_for_metrics.extend(done)
        for episode, states in self._chunk_start_states:  # after the cuts, which deep-copy custom_data
            self._store_chunk_start_states(episode, **states)
        samples = done + chunks
        self._log_env_steps(metric=self._metrics_num_env_steps_sampled, num_steps=ts)
        self._increase_sampled_metrics(ts, len(done))
        return samples

    def _keep_look_back_states(self, ongoing: list, steps: _Steps) -> None:
        """Gives each cut episode the look-back STATE_OUT that RLlib's cut keeps: its chunk's last step's."""
        last = map_arrays(functools.partial(to_numpy, copy=False), steps.last_state)
        for env, (episode, cut) in enumerate(zip(ongoing, self._ongoing_episodes, strict=True)):
            if len(episode) == 0:  # no step in this call: the cut holds what the episode held
                continue
            buffer = InfiniteLookbackBuffer(map_arrays(lambda array, env=env: array[env : env + 1].copy(), last))
            buffer.lookback = 1  # the constructor caps it at a nest's key count
            cut.extra_model_outputs[Columns.STATE_OUT] = buffer


def chunk_start_states_store(config: Any) -> Any:
    """The config's Learner's `store_chunk_start_states` (module docstring), or None where the runner keeps every step's state.

    With a look-back horizon above one step RLlib's cut keeps more than the last state: every step's is kept.
    """
    if config.episode_lookback_horizon != 1:
        return None
    return getattr(config.learner_class, "store_chunk_start_states", None)


def _chunk_start_states(
    episode: SingleAgentEpisode, columns: _Columns, length: int, env: int, reset: int | None, start: int, stop: int
) -> dict[str, Any]:
    """`store_chunk_start_states`' arguments for env `env`'s steps start..stop-1 of `episode` (None: reset at `reset`),
    in chunks of `length` steps."""
    look_back = None
    if reset is None and episode.t_started > 0:  # its cut kept the look-back (`_keep_look_back_states`)
        look_back = map_arrays(
            np.array,
            episode.get_extra_model_outputs(key=Columns.STATE_OUT, indices=-1, neg_index_as_lookback=True),
        )
    rows = [columns.state_rows[step] for step in range(start + length - 1, stop, length)]
    return {
        "max_seq_len": length,
        "look_back": look_back,
        "chunk_ends": map_arrays(lambda states: states[rows, env], columns.states),
    }


class ListInfoVectorEnv(gym.vector.VectorWrapper):
    """RLlib's vector env (`DictInfoToList(SyncVectorEnv)`, autoreset on the next step) without the round trip
    of its infos: SyncVectorEnv merges the envs' info dicts into one dict of arrays (`_add_info`) and
    DictInfoToList splits it into per-env dicts again, ~0.15 ms a step for the main job's 32 Mess3 envs
    (docs/performance.md, "Sampling"). This steps and resets the same envs the same way (SyncVectorEnv's
    NEXT_STEP autoreset: an env that ended resets on its next step, reward 0, its action unused) and
    returns each env's own info dict; the observations, rewards and flags are the same arrays.
    """

    def __init__(self, env: DictInfoToList):
        super().__init__(env)
        self.vector = env.env
        self.autoreset = np.zeros(self.vector.num_envs, dtype=bool)

    @staticmethod
    def serves(env) -> bool:
        """Whether `env` is RLlib's single-agent vector env as this wrapper expects it."""
        return (
            type(env) is DictInfoToList
            and type(env.env) is gym.vector.SyncVectorEnv
            and env.env.autoreset_mode == gym.vector.AutoresetMode.NEXT_STEP
        )

    def reset(self, *, seed=None, options=None):
        if options and "reset_mask" in options:  # a partial reset: SyncVectorEnv's own, its infos as DictInfoToList's
            mask = np.asarray(options["reset_mask"])
            observations, infos = self.env.reset(seed=seed, options=options)
            self.autoreset[mask] = False
            return observations, infos
        seeds = [seed + index for index in range(self.num_envs)] if isinstance(seed, int) else seed
        results = [
            env.reset(seed=None if seeds is None else seeds[index], options=options)
            for index, env in enumerate(self.vector.envs)
        ]
        self.autoreset[:] = False
        return self._observations([observation for observation, _ in results]), [info for _, info in results]

    def step(self, actions):
        count = self.num_envs
        observations, infos = [None] * count, [None] * count
        rewards = np.zeros(count, dtype=np.float64)
        terminateds, truncateds = np.zeros(count, dtype=bool), np.zeros(count, dtype=bool)
        for index, (action, env) in enumerate(zip(iterate(self.vector.action_space, actions), self.vector.envs)):
            if self.autoreset[index]:
                observations[index], infos[index] = env.reset()
            else:
                observations[index], rewards[index], terminateds[index], truncateds[index], infos[index] = env.step(
                    action
                )
        self.autoreset = terminateds | truncateds
        return self._observations(observations), rewards, terminateds, truncateds, infos

    def _observations(self, observations: list):
        return concatenate(
            self.vector.single_observation_space,
            observations,
            create_empty_array(self.vector.single_observation_space, self.num_envs),
        )


class _Steps:
    """Each vectorised step's arrays as they came, and per env whether it reset or ended there."""

    def __init__(self, pending: np.ndarray, lengths: np.ndarray, chunk_length: int | None = None):
        self.observations, self.actions, self.rewards, self.infos, self.outputs = [], [], [], [], []
        self.terminateds, self.truncateds, self.resets, self.dones, self.times = [], [], [], [], []
        self.pending = pending  # envs whose next step is a reset
        self.lengths = lengths  # each env's episode chunk's steps so far (a reset starts a new one)
        # With a chunk length, STATE_OUT is kept only at steps where some env's chunk reaches a multiple
        # of it (None elsewhere), and the last step's for the look-back.
        self.chunk_length = chunk_length
        self.states: list[Any] = []
        self.last_state: Any = None
        self.pipeline_seconds = {ENV_TO_MODULE_CONNECTOR: 0.0, MODULE_TO_ENV_CONNECTOR: 0.0}

    @property
    def count(self) -> int:
        return len(self.times)

    def add(self, actions, outputs: dict, results, now: float) -> int:
        """Records one step; returns how many envs stepped (a reset is not a step, as in RLlib)."""
        observations, rewards, terminateds, truncateds, infos = results
        resets = self.pending
        dones = ~resets & (terminateds | truncateds)
        state = outputs.get(Columns.STATE_OUT)
        if self.chunk_length is not None:
            outputs = {column: output for column, output in outputs.items() if column != Columns.STATE_OUT}
        for column, value in (
            (self.observations, observations),
            (self.actions, actions),
            (self.rewards, rewards),
            (self.infos, infos),
            (self.outputs, outputs),
            (self.terminateds, terminateds),
            (self.truncateds, truncateds),
            (self.resets, resets),
            (self.dones, dones),
            (self.times, now),
        ):
            column.append(value)
        self.pending = dones
        self.lengths = np.where(resets, 0, self.lengths + 1)
        if self.chunk_length is not None:
            self.states.append(state if (~resets & (self.lengths % self.chunk_length == 0)).any() else None)
            self.last_state = state
        return int(len(rewards) - resets.sum())

    def stacked(self) -> _Columns:
        numpy = functools.partial(to_numpy, copy=False)  # of fresh stacks
        outputs = map_arrays(numpy, _leafwise(torch.stack, self.outputs))
        columns = _Columns(
            stacked(self.observations),
            stacked(self.actions),
            np.stack(self.rewards),
            outputs,
            np.stack(self.terminateds),
            np.stack(self.truncateds),
            np.stack(self.resets),
            np.stack(self.dones),
        )
        if self.chunk_length is not None:
            states = [*self.states[:-1], self.last_state]  # the last step's too: it shapes an empty selection
            kept = [step for step, state in enumerate(states) if state is not None]
            columns.state_rows = {step: row for row, step in enumerate(kept)}
            columns.states = map_arrays(numpy, _leafwise(torch.stack, [states[step] for step in kept]))
        return columns


class _Columns:
    """`_Steps` stacked: every array (steps, envs, ...)."""

    def __init__(self, observations, actions, rewards, outputs, terminateds, truncateds, resets, dones):
        self.observations, self.actions, self.rewards, self.outputs = observations, actions, rewards, outputs
        self.terminateds, self.truncateds, self.resets, self.dones = terminateds, truncateds, resets, dones
        # Where only the chunk starts' states are kept: the kept steps' STATE_OUTs (kept steps, envs, ...)
        # and each kept step's row there.
        self.states: Any = None
        self.state_rows: dict[int, int] = {}


# The episode's own buffers; every other column of a step is a model output.
_EPISODE_COLUMNS = ("observations", "infos", "actions", "rewards")


def _joined(buffer: InfiniteLookbackBuffer | None, *parts: Any) -> InfiniteLookbackBuffer:
    """A numpy buffer of `buffer`'s data (lookback included, kept as lookback) followed by `parts` (nests of arrays,
    None skipped), as `to_numpy()` leaves a buffer of those steps."""
    held = None
    if buffer is not None and (buffer.finalized or buffer.data):
        held = buffer.data if buffer.finalized else batch_items(buffer.data)
    parts = [part for part in (held, *parts) if part is not None]
    data = parts[0] if len(parts) == 1 else _leafwise(np.concatenate, parts)
    joined = InfiniteLookbackBuffer(data, space=buffer.space if buffer is not None else None)
    joined.lookback = buffer.lookback if buffer is not None else 0  # the constructor caps it at a nest's key count
    return joined


def _leafwise(function, nests: list) -> Any:
    """`function(leaves)` for each leaf position of nests of the same structure (dicts, tuples), e.g. np.concatenate."""
    first = nests[0]
    if isinstance(first, dict):
        return {key: _leafwise(function, [nest[key] for nest in nests]) for key in first}
    if isinstance(first, tuple):
        return tuple(_leafwise(function, list(leaves)) for leaves in zip(*nests))
    return function(nests)


def _steps_of(data: Any, start: int, stop: int, env: int) -> Any:
    """Env `env`'s steps start..stop-1 of a (steps, envs, ...) nest: views."""
    return map_arrays(lambda array: array[start:stop, env], data)


def _in_order(finished: list) -> list:
    """The finished episodes as RLlib's loop returns them: by the step they ended at, then by env."""
    return [episode for *_, episode in sorted(finished, key=lambda item: item[:2])]
