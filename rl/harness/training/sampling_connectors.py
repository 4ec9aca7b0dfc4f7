"""Faster connector pipelines for single-agent EnvRunners over a vector env: same episodes, less Python.

    from rl.harness.training.sampling_connectors import use_fast_connectors

    use_fast_connectors(config)    # an AlgorithmConfig; the harness does it for every run

RLlib's default pipelines work one env at a time. Module-to-env (GetActions,
TensorToNumpy, UnBatchToIndividualItems, RemoveSingleTsTimeRankFromBatch,
NormalizeAndClipActions, ListifyDataForVectorEnv) splits the module's batched outputs
into one item per env, squeezes the time rank of every item, deep-copies and clips
every action, and stacks the actions back for the vector env; env-to-module
(AddObservationsFromEpisodesToBatch, AddTimeDimToBatchAndZeroPad,
AddStatesFromEpisodesToBatch, BatchIndividualItems, NumpyToTensor) adds a time rank to
every item before it stacks them. For the main job (TransformerModel, 32 envs) the
pieces replaced here cost 0.90 ms (module-to-env, GetActions and TensorToNumpy aside) and
0.44 ms (env-to-module, NumpyToTensor aside) per vectorised step, together more than the
forward pass; their first replacements 0.09 and 0.15 ms (`//experiments/mess3:bench_sampling`,
docs/performance.md).

`ModuleOutputsForVectorEnv` is the whole module-to-env pipeline in one piece: it samples
the actions (a Categorical without distribution objects), turns the outputs into numpy
arrays, and works on the batched arrays: one squeeze per column, one clip or unsquash of
all actions, and the per-env views the EnvRunner indexes into (`to_env[column][env_index]`);
only the recurrent state becomes a list of per-env dicts. With GetActions and
TensorToNumpy folded in, the whole pipeline's 0.38 ms per vectorised step became 0.27.
`EpisodesToModuleBatch` is the whole env-to-module pipeline: it stacks each episode's last
observation and state once, adds the time rank to the stacked arrays and makes them tensors.
The EnvRunner's episodes come out identical to RLlib's pipelines
(`tests/sampling_connectors_test.py`).

Single-agent only, and each pipeline only when the config adds no pieces of its own to
it (they would expect RLlib's per-item layout); `use_fast_connectors` leaves the others
on RLlib's pipelines and says which it chose.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.module_to_env import GetActions
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical
from ray.rllib.utils.annotations import override
from ray.rllib.utils.numpy import convert_to_numpy
from ray.rllib.utils.spaces.space_utils import batch as batch_items
from ray.rllib.utils.spaces.space_utils import clip_action, get_base_struct_from_space, unbatch, unsquash_action
from ray.rllib.utils.torch_utils import convert_to_torch_tensor

# Which pipeline `use_fast_connectors` chose, as the manifest records it.
FAST_PIPELINE = "fast_vector_env"
RLLIB_PIPELINE = "rllib_default"
CUSTOM_PIPELINE = "config_own_pieces"


class ModuleOutputsForVectorEnv(ConnectorV2):
    """RLlib's whole module-to-env pipeline (GetActions ... ListifyDataForVectorEnv) for one agent, on batched arrays.

    Input: the module's outputs, row i belonging to the EnvRunner's episode i. Actions are
    sampled as GetActions samples them; a Categorical (TorchCategorical, explore) without
    its distribution objects, drawing the same actions from the same random numbers
    (`sample_categorical`). Output, as numpy: ACTIONS (and ACTIONS_FOR_ENV when normalising
    or clipping) as batched arrays for the vector env, STATE_OUT as a list of per-env
    nested dicts, every other column as a batched array; all without the single-step time
    rank that the env-to-module pipeline added for a stateful module.
    """

    def __init__(
        self,
        input_observation_space=None,
        input_action_space=None,
        *,
        normalize_actions: bool,
        clip_actions: bool,
        **kwargs,
    ):
        self._action_space_struct = None  # set by recompute_output_action_space once the space is known
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.normalize_actions = normalize_actions
        self.clip_actions = clip_actions
        self._get_actions = GetActions()

    @override(ConnectorV2)
    def recompute_output_action_space(self, input_observation_space, input_action_space):
        self._action_space_struct = get_base_struct_from_space(input_action_space)
        return input_action_space

    @override(ConnectorV2)
    def __call__(self, *, rl_module, batch: dict[str, Any], episodes, explore=None, shared_data=None, **kwargs):
        remove_time_rank = bool(shared_data and shared_data.get("_added_single_ts_time_rank"))
        output = self.batched(rl_module, batch, episodes, explore, remove_time_rank=remove_time_rank)
        if Columns.STATE_OUT in output:  # the EnvRunner stores one per episode
            output[Columns.STATE_OUT] = _rows(output[Columns.STATE_OUT], len(episodes))
        return output

    def batched(
        self, rl_module, batch: dict[str, Any], episodes, explore, *, remove_time_rank: bool, numpy: bool = True
    ) -> dict[str, Any]:
        """What `__call__` returns, STATE_OUT too as batched arrays: every column (N, ...) for N episodes.

        With `numpy=False` only the actions become numpy arrays (the env needs them now); the other
        columns stay the module's tensors, for a caller that converts many steps at once (`to_numpy`).
        """
        if Columns.ACTIONS not in batch:
            self._add_actions(rl_module, batch, episodes, explore)
        batch = {
            column: map_arrays(to_numpy, data) if numpy or column == Columns.ACTIONS else data
            for column, data in batch.items()
        }
        _check_one_row_per_episode(batch, episodes)
        output = {}
        for column, data in batch.items():
            if remove_time_rank and column != Columns.STATE_OUT:  # STATE_OUT has no time rank
                output[column] = map_arrays(lambda array: array.squeeze(1), data)
            else:
                output[column] = data
        if self.normalize_actions:
            output[Columns.ACTIONS_FOR_ENV] = unsquash_action(output[Columns.ACTIONS], self._action_space_struct)
        elif self.clip_actions:
            output[Columns.ACTIONS_FOR_ENV] = clip_action(output[Columns.ACTIONS], self._action_space_struct)
        return output

    def _add_actions(self, rl_module, batch: dict[str, Any], episodes, explore) -> None:
        if (
            explore
            and Columns.ACTION_DIST_INPUTS in batch
            and Columns.ACTION_LOGP not in batch
            and rl_module.get_exploration_action_dist_cls() is TorchCategorical
        ):
            batch[Columns.ACTIONS], batch[Columns.ACTION_LOGP] = sample_categorical(batch[Columns.ACTION_DIST_INPUTS])
        else:
            self._get_actions(rl_module=rl_module, batch=batch, episodes=episodes, explore=explore)


def sample_categorical(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(actions, their log-probabilities) from `logits` (..., n), as `TorchCategorical.from_logits(logits)`
    gives them with `sample()` and `logp(actions)`: the same ops in the same order, so the same
    random numbers draw the same actions, without the distribution objects (and their argument
    checks). With the numpy conversion folded in too, the module-to-env pipeline went from 0.38 to
    0.27 ms a vectorised step (docs/performance.md).

    Example:
        actions, logp = sample_categorical(torch.zeros(32, 4))    # 32 uniform draws from 4 actions
    """
    normalized = logits - logits.logsumexp(dim=-1, keepdim=True)
    probs = torch.softmax(normalized, dim=-1)
    actions = torch.multinomial(probs.reshape(-1, logits.shape[-1]), 1, True).T.reshape(logits.shape[:-1])
    return actions, normalized.gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def to_numpy(value: Any, *, copy: bool = True) -> Any:
    """RLlib's TensorToNumpy (`convert_to_numpy`) for one leaf: a tensor as a numpy array (a 0-d one as a
    Python number), floats as float32 and signed integers as int32 (RLlib's `reduce_type`). A copy, as
    RLlib's (episodes keep no view of the module's tensors), unless `copy=False` for a tensor nothing else holds."""
    if isinstance(value, torch.Tensor):
        value = value.item() if value.dim() == 0 else value.numpy(force=True)
    if isinstance(value, np.ndarray):
        if np.issubdtype(value.dtype, np.floating):
            return value.astype(np.float32, copy=copy)
        if np.issubdtype(value.dtype, int):
            return value.astype(np.int32, copy=copy)
    return value


class EpisodesToModuleBatch(ConnectorV2):
    """RLlib's whole env-to-module pipeline (AddObservationsFromEpisodesToBatch ... NumpyToTensor) for one agent.

    Output: OBS, each episode's last observation stacked (B, ...), and for a stateful
    module STATE_IN, each episode's last STATE_OUT (its initial state at the start)
    stacked, with a single-step time rank on OBS (B, 1, ...); as tensors on `device`,
    converted as NumpyToTensor converts them (`as_tensors`).
    """

    def __init__(self, input_observation_space=None, input_action_space=None, *, device=None, **kwargs):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.device = device

    @override(ConnectorV2)
    def __call__(self, *, rl_module, batch: dict[str, Any], episodes, explore=None, shared_data=None, **kwargs):
        return as_tensors(self._stacked_inputs(rl_module, batch, episodes, shared_data), self.device)

    def _stacked_inputs(self, rl_module, batch: dict[str, Any], episodes, shared_data) -> dict[str, Any]:
        observations = batch_items([episode.get_observations(-1) for episode in episodes])
        # RLlib's UnBatchToIndividualItems reads which episode each row is, should a config keep it.
        shared_data["memorized_map_structure"] = [episode.id_ for episode in episodes]
        if not rl_module.is_stateful():
            return {**batch, **module_batch(observations)}
        initial_state = None
        states = []
        for episode in episodes:
            if (episode.t_started == 0 and len(episode) == 0) or Columns.STATE_OUT not in episode.extra_model_outputs:
                initial_state = initial_state or convert_to_numpy(rl_module.get_initial_state())
                states.append(initial_state)
            else:
                states.append(episode.get_extra_model_outputs(key=Columns.STATE_OUT, indices=-1))
        shared_data["_added_single_ts_time_rank"] = True  # ModuleOutputsForVectorEnv removes it again
        return {**batch, **module_batch(observations, stacked(states))}


def module_batch(observations: Any, states: Any = None) -> dict[str, Any]:
    """A module's input for one vectorised step (numpy): OBS (B, ...) alone for a stateless module; with
    `states` (STATE_IN, B rows) OBS with a single-step time rank (B, 1, ...), as RLlib adds it."""
    if states is None:
        return {Columns.OBS: observations}
    return {Columns.OBS: map_arrays(lambda array: array[:, np.newaxis], observations), Columns.STATE_IN: states}


def as_tensors(data: dict[str, Any], device=None) -> dict[str, Any]:
    """RLlib's `convert_to_torch_tensor(data, device)` (NumpyToTensor's conversion) for the fresh arrays
    EpisodesToModuleBatch stacks (nested dicts, lists and tuples of arrays): on the CPU one
    `torch.from_numpy` per array, floats as float32 (float16 kept), object and string arrays left
    as they are; on another device RLlib's own conversion.

    Example:
        as_tensors({"obs": np.zeros((32, 1, 7))})["obs"].dtype    # torch.float32
    """
    if device is not None and torch.device(device).type != "cpu":
        return convert_to_torch_tensor(data, device=device)
    return map_arrays(_cpu_tensor, data)


def _cpu_tensor(value: Any) -> Any:
    if value is None or isinstance(value, np.ndarray) and (value.dtype == object or value.dtype.type is np.str_):
        return value  # as RLlib leaves them
    tensor = value if torch.is_tensor(value) else torch.from_numpy(np.asarray(value))
    return tensor.float() if tensor.is_floating_point() and tensor.dtype != torch.float16 else tensor


def map_arrays(function, data: Any) -> Any:
    """`function` applied to every array in a nest of dicts, lists and tuples."""
    if isinstance(data, dict):
        return {key: map_arrays(function, value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(map_arrays(function, value) for value in data)
    return function(data)


def stacked(structures: list) -> Any:
    """RLlib's `batch(structures)` with fewer calls for nested dicts of arrays (one np.stack per leaf)."""
    first = structures[0]
    if isinstance(first, dict):
        return {key: stacked([structure[key] for structure in structures]) for key in first}
    if isinstance(first, np.ndarray):
        return np.stack(structures)
    return batch_items(structures)


def _rows(data: Any, count: int) -> list:
    """RLlib's `unbatch(data)` (one structure per row, its arrays views) with fewer calls for nested dicts."""
    if isinstance(data, dict):
        rows_by_key = {key: _rows(value, count) for key, value in data.items()}
        return [{key: rows[row] for key, rows in rows_by_key.items()} for row in range(count)]
    if isinstance(data, np.ndarray):
        return list(data)
    return unbatch(data)


def _check_one_row_per_episode(batch: dict[str, Any], episodes: list) -> int:
    """The batch's row count, after checking that there is one row per episode (RLlib pairs them by position)."""
    actions = batch[Columns.ACTIONS]
    while isinstance(actions, (dict, list, tuple)):  # a Dict or Tuple action space: any component
        actions = next(iter(actions.values())) if isinstance(actions, dict) else actions[0]
    rows = len(actions)
    if rows != len(episodes):
        raise ValueError(
            f"ModuleOutputsForVectorEnv got {rows} module output rows for {len(episodes)} episodes: it serves "
            "single-agent EnvRunners, whose env-to-module pipeline batches one row per episode. To keep "
            "RLlib's module-to-env pipeline instead, give the config module-to-env pieces of its own "
            "(config.env_runners(module_to_env_connector=lambda env, spaces: []))."
        )
    return rows


class FastModuleToEnv:
    """What `config.env_runners(module_to_env_connector=...)` calls: the whole fast pipeline.

    ModuleOutputsForVectorEnv alone, in one piece (each piece costs RLlib's pipeline a timer
    and a call); it goes with `add_default_connectors_to_module_to_env_pipeline=False`.
    """

    def __init__(self, *, normalize_actions: bool, clip_actions: bool):
        self.normalize_actions = normalize_actions
        self.clip_actions = clip_actions

    def __call__(self, env=None, spaces=None) -> list[ConnectorV2]:
        return [ModuleOutputsForVectorEnv(normalize_actions=self.normalize_actions, clip_actions=self.clip_actions)]


class FastEnvToModule:
    """What `config.env_runners(env_to_module_connector=...)` calls: EpisodesToModuleBatch, the whole pipeline.

    It goes with `add_default_connectors_to_env_to_module_pipeline=False`.
    """

    def __call__(self, env=None, spaces=None, device=None) -> list[ConnectorV2]:
        return [EpisodesToModuleBatch(device=device)]


ENV_TO_MODULE = "env_to_module"
MODULE_TO_ENV = "module_to_env"
_FAST_PIECES = {ENV_TO_MODULE: FastEnvToModule, MODULE_TO_ENV: FastModuleToEnv}


def _own_pieces(config, pipeline: str) -> Any:
    # RLlib 2.56 keeps what `env_runners(<pipeline>_connector=...)` set only in private attributes.
    return getattr(config, f"_{pipeline}_connector")


def _adds_defaults(config, pipeline: str) -> bool:
    return getattr(config, f"add_default_connectors_to_{pipeline}_pipeline")


def connector_pipelines(config) -> dict[str, str]:
    """Which pipelines `config`'s EnvRunners build: {ENV_TO_MODULE, MODULE_TO_ENV: FAST_, RLLIB_ or CUSTOM_PIPELINE}."""
    chosen = {}
    for pipeline, fast_class in _FAST_PIECES.items():
        own, defaults = _own_pieces(config, pipeline), _adds_defaults(config, pipeline)
        if isinstance(own, fast_class) and not defaults:
            chosen[pipeline] = FAST_PIPELINE
        elif own is None and defaults:
            chosen[pipeline] = RLLIB_PIPELINE
        else:
            chosen[pipeline] = CUSTOM_PIPELINE
    return chosen


def use_fast_connectors(config) -> dict[str, str]:
    """Puts `config`'s EnvRunners on the fast pipelines where they apply; returns `connector_pipelines(config)`.

    A multi-agent config stays on RLlib's pipelines; a pipeline to which the config adds
    pieces of its own (or whose defaults it switched off) keeps them: both are left unchanged.
    """
    chosen = connector_pipelines(config)
    if config.is_multi_agent:
        return chosen
    if chosen[ENV_TO_MODULE] == RLLIB_PIPELINE:
        config.env_runners(
            env_to_module_connector=FastEnvToModule(), add_default_connectors_to_env_to_module_pipeline=False
        )
    if chosen[MODULE_TO_ENV] == RLLIB_PIPELINE:
        config.env_runners(
            module_to_env_connector=FastModuleToEnv(
                normalize_actions=config.normalize_actions, clip_actions=config.clip_actions
            ),
            add_default_connectors_to_module_to_env_pipeline=False,
        )
    return connector_pipelines(config)
