"""A faster module-to-env connector pipeline for single-agent EnvRunners over a vector env.

    from rl.harness.sampling_connectors import use_fast_module_to_env

    use_fast_module_to_env(config)     # an AlgorithmConfig; the harness does it for every run

RLlib's default module-to-env pipeline (GetActions, TensorToNumpy,
UnBatchToIndividualItems, RemoveSingleTsTimeRankFromBatch, NormalizeAndClipActions,
ListifyDataForVectorEnv) splits the module's batched outputs into one item per env
and then works item by item: it squeezes the time rank of every item, deep-copies
and clips every action, and stacks the actions back for the vector env. For the main
job (TransformerModel, 32 envs) its last four pieces cost 0.88 ms per vectorised step,
more than the forward pass; `ModuleOutputsForVectorEnv`, which replaces them, 0.08 ms
(docs/performance.md). It works on the batched arrays: one squeeze per column, one
clip or unsquash of all actions, and the per-env views the EnvRunner indexes into
(`to_env[column][env_index]`); only the recurrent state becomes a list of per-env
dicts. The EnvRunner's episodes come out identical to RLlib's pipeline
(`tests/sampling_connectors_test.py`).

Single-agent only, and only when the config adds no module-to-env pieces of its
own (they would expect RLlib's per-item layout); `use_fast_module_to_env` leaves
other configs on RLlib's pipeline and says which it chose.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.module_to_env import GetActions, TensorToNumpy
from ray.rllib.core.columns import Columns
from ray.rllib.utils.annotations import override
from ray.rllib.utils.spaces.space_utils import clip_action, get_base_struct_from_space, unbatch, unsquash_action

# What `use_fast_module_to_env` chose, as the manifest records it.
FAST_PIPELINE = "fast_vector_env"
RLLIB_PIPELINE = "rllib_default"
CUSTOM_PIPELINE = "config_own_pieces"


class ModuleOutputsForVectorEnv(ConnectorV2):
    """RLlib's UnBatchToIndividualItems ... ListifyDataForVectorEnv for one agent, on batched arrays.

    Input: the module's outputs after TensorToNumpy, row i belonging to the EnvRunner's
    episode i. Output: ACTIONS (and ACTIONS_FOR_ENV when normalising or clipping) as
    batched arrays for the vector env, STATE_OUT as a list of per-env nested dicts,
    every other column as a batched array; all without the single-step time rank that
    the env-to-module pipeline added for a stateful module.
    """

    def __init__(self, input_observation_space=None, input_action_space=None, *, normalize_actions: bool,
                 clip_actions: bool, **kwargs):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.normalize_actions = normalize_actions
        self.clip_actions = clip_actions
        self._action_space_struct = get_base_struct_from_space(self.input_action_space)

    @override(ConnectorV2)
    def recompute_output_action_space(self, input_observation_space, input_action_space):
        self._action_space_struct = get_base_struct_from_space(input_action_space)
        return input_action_space

    @override(ConnectorV2)
    def __call__(self, *, rl_module, batch: dict[str, Any], episodes, explore=None, shared_data=None, **kwargs):
        rows = _check_one_row_per_episode(batch, episodes)
        remove_time_rank = bool(shared_data and shared_data.get("_added_single_ts_time_rank"))
        output = {}
        for column, data in batch.items():
            if column == Columns.STATE_OUT:  # no time rank; the EnvRunner stores one per episode
                output[column] = _rows(data, rows)
            elif remove_time_rank:
                output[column] = _map_arrays(lambda array: np.squeeze(array, axis=1), data)
            else:
                output[column] = data
        if self.normalize_actions:
            output[Columns.ACTIONS_FOR_ENV] = unsquash_action(output[Columns.ACTIONS], self._action_space_struct)
        elif self.clip_actions:
            output[Columns.ACTIONS_FOR_ENV] = clip_action(output[Columns.ACTIONS], self._action_space_struct)
        return output


def _map_arrays(function, data: Any) -> Any:
    """`function` applied to every array in a nest of dicts, lists and tuples."""
    if isinstance(data, dict):
        return {key: _map_arrays(function, value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_map_arrays(function, value) for value in data)
    return function(data)


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
            "single-agent EnvRunners, whose env-to-module pipeline batches one row per episode. Leave this "
            "config on RLlib's module-to-env pipeline (do not call use_fast_module_to_env)."
        )
    return rows


class FastModuleToEnv:
    """What `config.env_runners(module_to_env_connector=...)` calls: the whole fast pipeline.

    RLlib's first two pieces (GetActions, TensorToNumpy), then ModuleOutputsForVectorEnv; it
    goes with `add_default_connectors_to_module_to_env_pipeline=False`.
    """

    def __init__(self, *, normalize_actions: bool, clip_actions: bool):
        self.normalize_actions = normalize_actions
        self.clip_actions = clip_actions

    def __call__(self, env=None, spaces=None) -> list[ConnectorV2]:
        return [GetActions(), TensorToNumpy(),
                ModuleOutputsForVectorEnv(normalize_actions=self.normalize_actions, clip_actions=self.clip_actions)]


def _own_module_to_env(config) -> Any:
    # RLlib 2.56 keeps what `env_runners(module_to_env_connector=...)` set only in this private attribute.
    return config._module_to_env_connector


def module_to_env_pipeline(config) -> str:
    """Which module-to-env pipeline `config`'s EnvRunners build: FAST_PIPELINE, RLLIB_PIPELINE or CUSTOM_PIPELINE."""
    own = _own_module_to_env(config)
    if isinstance(own, FastModuleToEnv) and not config.add_default_connectors_to_module_to_env_pipeline:
        return FAST_PIPELINE
    if own is None and config.add_default_connectors_to_module_to_env_pipeline:
        return RLLIB_PIPELINE
    return CUSTOM_PIPELINE


def use_fast_module_to_env(config) -> str:
    """Puts `config`'s EnvRunners on the fast module-to-env pipeline where it applies; returns which one runs.

    A multi-agent config stays on RLlib's pipeline, and one with module-to-env pieces (or
    RLlib's defaults switched off) of its own keeps them: both are left unchanged.
    """
    if config.is_multi_agent or module_to_env_pipeline(config) != RLLIB_PIPELINE:
        return module_to_env_pipeline(config)
    config.env_runners(
        module_to_env_connector=FastModuleToEnv(normalize_actions=config.normalize_actions,
                                                clip_actions=config.clip_actions),
        add_default_connectors_to_module_to_env_pipeline=False,
    )
    return FAST_PIPELINE
