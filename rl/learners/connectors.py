"""Faster drop-ins for RLlib's learner-connector pieces that cut episodes into `max_seq_len` chunks.

    from rl.learners.connectors import use_fast_chunking

    use_fast_chunking(learner_connector_pipeline)   # ActorCriticPPOTorchLearner does it when built

RLlib's `AddTimeDimToBatchAndZeroPad` pads every column of every episode one item at
a time, and `AddStatesFromEpisodesToBatch` copies the recurrent state of every step
of an episode (or repeats the initial state that many times) to keep one per chunk.
For stateful modules with a large state (TransformerModel: the cached keys and
values) that is most of a PPO update's connector time. `ZeroPadToChunks` pads each
column with one array copy and `AddChunkStartStates` reads only the chunk starts'
states; both produce exactly RLlib's batch (`tests/connectors_test.py`) and hand
anything they do not specialise (nested items, non-numpy episodes, env-to-module
use) to the RLlib piece they derive from.

`AddInfoColumn` turns a key of the env's infos into a batch column aligned with the
actions (e.g. the targets of an auxiliary prediction head):

    insert_before_chunking(learner_pipeline, AddInfoColumn(info_key="token", offset=1, column="next_tokens"))
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ray.rllib.connectors.common.add_states_from_episodes_to_batch import AddStatesFromEpisodesToBatch
from ray.rllib.connectors.common.add_time_dim_to_batch_and_zero_pad import AddTimeDimToBatchAndZeroPad
from ray.rllib.connectors.connector_pipeline_v2 import ConnectorPipelineV2
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner.add_one_ts_to_episodes_and_truncate import AddOneTsToEpisodesAndTruncate
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.utils.annotations import override
from ray.rllib.utils.numpy import convert_to_numpy
from ray.rllib.utils.postprocessing.episodes import add_one_ts_to_episodes_and_truncate
from ray.rllib.utils.postprocessing.zero_padding import create_mask_and_seq_lens, split_and_zero_pad
from ray.rllib.utils.spaces.space_utils import BatchedNdArray


def zero_padded_chunks(items: list[Any], max_seq_len: int) -> list[np.ndarray]:
    """RLlib's `split_and_zero_pad(items, max_seq_len)` with one copy when the items are flat.

    `items` are all single steps or all `BatchedNdArray`s of steps; other lists go to RLlib.

    Example:
        zero_padded_chunks([BatchedNdArray([1, 2, 3])], 2)    # [array([1, 2]), array([3, 0])]
    """
    # Like RLlib, take the structure from the first item.
    batched = [isinstance(item, BatchedNdArray) for item in items]
    if any(batched) != all(batched) or isinstance(items[0], (dict, list, tuple)):
        return split_and_zero_pad(items, max_seq_len=max_seq_len)
    if batched[0]:
        steps = np.concatenate(items)
    else:  # RLlib stacks single steps in the first one's dtype
        steps = np.asarray(items, dtype=items[0].dtype if isinstance(items[0], np.ndarray) else None)
    chunks = math.ceil(len(steps) / max_seq_len)
    padded = np.zeros((chunks * max_seq_len, *steps.shape[1:]), dtype=steps.dtype)
    padded[: len(steps)] = steps
    return list(padded.reshape(chunks, max_seq_len, *steps.shape[1:]))


def _map_states(function: Any, *states: Any) -> Any:
    """`function` applied leaf by leaf to recurrent states (RLlib's: nested dicts of arrays)."""
    if isinstance(states[0], dict):
        return {key: _map_states(function, *(state[key] for state in states)) for key in states[0]}
    return function(*states)


# custom_data of an episode whose per-step STATE_OUTs `keep_chunk_start_states` dropped: the states
# AddChunkStartStates reads in their place.
CHUNK_START_STATES = "chunk_start_states"


def keep_chunk_start_states(rl_module: Any, episodes: list) -> None:
    """Replaces each numpy episode's per-step STATE_OUTs by the few that AddChunkStartStates reads, in place.

    Episodes that cross processes are pickled whole, and a stateful module's per-step state is
    most of their bytes (TransformerModel's cached keys and values), while the Learner reads one
    state per `max_seq_len` steps: the look-back state and every chunk's last step's STATE_OUT.
    Only those are kept (`store_chunk_start_states`); the Learner's batch is the same.
    A loss that reads next states (NEXT_STATE_IN) needs the per-step ones: AddChunkStartStates
    refuses such episodes for it.

    Example:
        keep_chunk_start_states(env_runner.module, episodes)   # on a remote EnvRunner, before returning them
    """
    for episode in episodes:
        module = _single_agent_module(rl_module, episode)
        if not (episode.is_numpy and module.is_stateful() and Columns.STATE_OUT in episode.extra_model_outputs):
            continue
        max_seq_len = module.model_config["max_seq_len"]
        look_back = None
        if episode.t_started > 0:
            look_back = _map_states(
                np.array,
                episode.get_extra_model_outputs(key=Columns.STATE_OUT, indices=-1, neg_index_as_lookback=True),
            )
        chunk_ends = _map_states(
            lambda outs, step=max_seq_len: np.ascontiguousarray(outs[step - 1 :: step]),
            episode.get_extra_model_outputs(key=Columns.STATE_OUT),
        )
        del episode.extra_model_outputs[Columns.STATE_OUT]
        store_chunk_start_states(episode, max_seq_len=max_seq_len, look_back=look_back, chunk_ends=chunk_ends)


def store_chunk_start_states(episode: Any, *, max_seq_len: int, look_back: Any, chunk_ends: Any) -> None:
    """Gives `episode`, which holds no per-step STATE_OUT, the recurrent states AddChunkStartStates reads.

    `look_back`: the STATE_OUT of the step before the episode's first (None when it starts at
    t=0); `chunk_ends`: the STATE_OUTs of its steps `max_seq_len - 1`, `2 * max_seq_len - 1`, ...,
    stacked (the nest of the module's state, each leaf (chunk ends, ...)). A Learner whose batch
    reads no other states names this function as its `store_chunk_start_states` attribute, and
    the harness's EnvRunner then keeps only these while it samples.

    Example:
        store_chunk_start_states(episode, max_seq_len=16, look_back=None, chunk_ends=states[15::16])
    """
    episode.custom_data[CHUNK_START_STATES] = {
        "max_seq_len": max_seq_len,
        "look_back": look_back,
        "chunk_ends": chunk_ends,
    }


def _single_agent_module(rl_module: Any, episode: Any) -> Any:
    """The RLModule that trains on `episode` (as RLlib's stateful pieces pick it)."""
    if episode.module_id is not None:
        return rl_module[episode.module_id]
    return rl_module[DEFAULT_MODULE_ID] if isinstance(rl_module, MultiRLModule) else rl_module


class ZeroPadToChunks(AddTimeDimToBatchAndZeroPad):
    """AddTimeDimToBatchAndZeroPad (learner connector) that pads each column with one copy."""

    @override(ConnectorV2)
    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list, shared_data: Any = None, **kwargs):
        specialised = self._as_learner_connector and rl_module is not None
        if not specialised or not rl_module.is_stateful() or Columns.STATE_IN in batch:
            return super().__call__(
                rl_module=rl_module, batch=batch, episodes=episodes, shared_data=shared_data, **kwargs
            )
        # RLlib's learner branch, with zero_padded_chunks for split_and_zero_pad.
        for column, column_data in batch.items():
            if column == Columns.INFOS:
                continue
            for key, items in column_data.items():
                module_id = key[2] if len(key) == 3 else None
                if module_id is not None and not rl_module[module_id].is_stateful():
                    continue
                column_data[key] = zero_padded_chunks(items, self._get_max_seq_len(rl_module, module_id=module_id))
                shared_data[f"_zero_padded_for_mid={module_id if module_id is not None else DEFAULT_MODULE_ID}"] = True
        for episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
            module = _single_agent_module(rl_module, episode)
            if not module.is_stateful():
                continue
            mask, seq_lens = create_mask_and_seq_lens(len(episode), module.model_config["max_seq_len"])
            self.add_n_batch_items(batch, Columns.SEQ_LENS, seq_lens, len(seq_lens), episode)
            if not shared_data.get("_added_loss_mask_for_valid_episode_ts"):
                self.add_n_batch_items(batch, Columns.LOSS_MASK, mask, len(mask), episode)
        return batch


class AddChunkStartStates(AddStatesFromEpisodesToBatch):
    """AddStatesFromEpisodesToBatch (learner connector) that reads only the states at chunk starts.

    Numpy episodes only (remote EnvRunners'); list episodes, which a local EnvRunner hands a
    local Learner, go to RLlib's path, whose per-item reads need no stacking of a list.
    """

    @override(ConnectorV2)
    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list, **kwargs):
        all_episodes = list(self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False))
        specialised = (
            self._as_learner_connector and rl_module is not None and all(episode.is_numpy for episode in all_episodes)
        )
        if not specialised or not rl_module.is_stateful() or Columns.STATE_IN in batch:
            return super().__call__(rl_module=rl_module, batch=batch, episodes=episodes, **kwargs)
        initial_states: dict[int, Any] = {}
        for episode in all_episodes:
            module = _single_agent_module(rl_module, episode)
            if not module.is_stateful():
                continue
            max_seq_len = module.model_config["max_seq_len"]
            chunks = math.ceil(len(episode) / max_seq_len)
            kept = episode.custom_data.get(CHUNK_START_STATES)
            has_states = kept is not None or Columns.STATE_OUT in episode.extra_model_outputs
            if episode.t_started == 0 or not has_states:
                if id(module) not in initial_states:
                    initial_states[id(module)] = convert_to_numpy(module.get_initial_state())
                look_back_state = initial_states[id(module)]
            elif kept is not None:
                look_back_state = kept["look_back"]
            else:  # a continuation chunk of a cut episode starts from the state before it
                look_back_state = episode.get_extra_model_outputs(
                    key=Columns.STATE_OUT, indices=-1, neg_index_as_lookback=True
                )
            # RLlib: STATE_IN of chunk k is the STATE_OUT of step k * max_seq_len - 1 (the
            # look-back state for k = 0); without STATE_OUTs, the look-back state throughout.
            # STATE_IN never reads the last step's STATE_OUT (AddBootstrapStep leaves the bootstrap step's out).
            if kept is not None:
                _check_kept_states(kept, max_seq_len, batch)
                state_outs = None
                chunk_states = _map_states(
                    lambda first, ends, count=chunks - 1: np.concatenate([first[None], ends[:count]]),
                    look_back_state,
                    kept["chunk_ends"],
                )
            elif has_states:
                state_outs = episode.get_extra_model_outputs(key=Columns.STATE_OUT)
                last = len(episode) - 1
                chunk_states = _map_states(
                    lambda first, outs, step=max_seq_len, end=last: np.concatenate(
                        [first[None], outs[step - 1 : end : step]]
                    ),
                    look_back_state,
                    state_outs,
                )
            else:
                state_outs = None
                chunk_states = _map_states(
                    lambda first, chunks=chunks: np.repeat(first[None], chunks, axis=0), look_back_state
                )
            self.add_n_batch_items(batch, Columns.STATE_IN, chunk_states, chunks, episode)
            if Columns.NEXT_OBS in batch:
                # RLlib: the STATE_OUT of every chunk's first step; a bootstrap step's is the last step's again.
                firsts = np.arange(0, len(episode), max_seq_len)
                next_states = (
                    chunk_states
                    if state_outs is None
                    else _map_states(lambda outs, firsts=firsts: outs[np.minimum(firsts, len(outs) - 1)], state_outs)
                )
                self.add_n_batch_items(batch, Columns.NEXT_STATE_IN, next_states, chunks, episode)
        return batch


def _check_kept_states(kept: dict, max_seq_len: int, batch: dict) -> None:
    """Raises unless the states `keep_chunk_start_states` kept are the ones this Learner's batch needs."""
    if kept["max_seq_len"] != max_seq_len:
        raise ValueError(
            f"an episode kept the chunk starts' states of max_seq_len {kept['max_seq_len']}, the Learner's module "
            f"chunks by {max_seq_len}: give the EnvRunners' module the Learner's model_config"
        )
    if Columns.NEXT_OBS in batch:
        raise ValueError(
            "this loss reads next states (NEXT_STATE_IN), but the episodes kept only the chunk starts' states: "
            "do not call keep_chunk_start_states on episodes for it"
        )


class AddInfoColumn(ConnectorV2):
    """Learner connector piece: `column` holds `info[info_key]` of episode step t + `offset`, for each batch step t.

    Episode step t is observation t and action t. `offset=0` reads the info that came with
    observation t (from reset or the previous step); `offset=1` the info the env returned from
    step t, i.e. after action t. The column has one item per step like the actions, so the
    chunking piece after it pads it like every other column (insert with `insert_before_chunking`).
    """

    def __init__(
        self,
        input_observation_space: Any = None,
        input_action_space: Any = None,
        *,
        info_key: str,
        offset: int,
        column: str,
        info_source: str = "the env",
        **kwargs: Any,
    ):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        if offset not in (0, 1):
            raise ValueError(
                f"offset must be 0 (the info with observation t) or 1 (the info after action t), got {offset!r}."
            )
        self.info_key, self.offset, self.column, self.info_source = info_key, offset, column, info_source

    @override(ConnectorV2)
    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes: list, **kwargs):
        for episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
            infos = episode.get_infos(slice(self.offset, self.offset + len(episode)))
            missing = next((step for step, info in enumerate(infos) if self.info_key not in info), None)
            if missing is not None:
                raise ValueError(
                    f"column '{self.column}' needs info['{self.info_key}'] at every step, but {self.info_source} "
                    f"returned an info without it (keys {sorted(infos[missing])}, episode step "
                    f"{missing + self.offset}); make the env return it or drop the term that reads '{self.column}' (a "
                    f"pipelined runner sends only the keys the Learner class's batch_info_keys() names)."
                )
            values = np.asarray([info[self.info_key] for info in infos])
            self.add_n_batch_items(batch, self.column, values, len(episode), episode)
        return batch


class AddBootstrapStep(AddOneTsToEpisodesAndTruncate):
    """RLlib's AddOneTsToEpisodesAndTruncate: the same bootstrap step on every episode and the same loss mask,
    terminated and truncated columns, added as one array per episode instead of one item per step.

    RLlib adds the three columns item by item (`add_n_batch_items` with lists: ~6,000 calls and
    2.2 ms for the main job's 32 episodes of 65 steps, 2026-12-05); an array per episode is the
    same batch once the chunking piece pads it (`tests/connectors_test.py`). Numpy episodes keep
    their STATE_OUT as it is, without a copy for the bootstrap step: only AddChunkStartStates,
    which `use_fast_chunking` installs with it, reads the states after it. Multi-agent episodes
    go to RLlib's piece.
    """

    @override(AddOneTsToEpisodesAndTruncate)
    def __call__(self, *, rl_module, batch: dict[str, Any], episodes, explore=None, shared_data=None, **kwargs):
        if episodes and isinstance(episodes[0], MultiAgentEpisode):
            return super().__call__(
                rl_module=rl_module, batch=batch, episodes=episodes, explore=explore, shared_data=shared_data, **kwargs
            )
        single_agent_episodes = list(self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False))
        numpy_episodes = all(episode.is_numpy for episode in single_agent_episodes)
        for index, episode in enumerate(single_agent_episodes):
            episode.id_ += "_" + str(index)
            length = len(episode)
            # A numpy buffer grows by a copy of all its steps, and the recurrent state is most of an
            # episode's bytes; the bootstrap step's would be the last step's again, which
            # AddChunkStartStates never reads. So it is left out.
            states = episode.extra_model_outputs.pop(Columns.STATE_OUT, None) if numpy_episodes else None
            add_one_ts_to_episodes_and_truncate([episode])
            if states is not None:
                episode.extra_model_outputs[Columns.STATE_OUT] = states
            loss_mask = np.ones(length + 1, dtype=bool)
            loss_mask[-1] = False  # the bootstrap step
            terminateds, truncateds = np.zeros(length + 1, dtype=bool), np.zeros(length + 1, dtype=bool)
            terminateds[length - 1] = bool(episode.is_terminated)  # the last real step ends the episode or its chunk
            truncateds[length - 1] = bool(episode.is_truncated)
            for column, values in (
                (Columns.LOSS_MASK, loss_mask),
                (Columns.TERMINATEDS, terminateds),
                (Columns.TRUNCATEDS, truncateds),
            ):
                self.add_n_batch_items(batch, column, values, length + 1, episode)
        shared_data["_added_loss_mask_for_valid_episode_ts"] = True
        return batch


def insert_before_chunking(learner_pipeline: ConnectorPipelineV2, piece: ConnectorV2) -> None:
    """Inserts `piece` just before the piece that cuts episodes into chunks (RLlib's or ZeroPadToChunks)."""
    for index, existing in enumerate(learner_pipeline.connectors):
        if isinstance(existing, AddTimeDimToBatchAndZeroPad):
            learner_pipeline.connectors.insert(index, piece)
            return
    raise ValueError(
        f"the learner connector has no {AddTimeDimToBatchAndZeroPad.__name__} to insert {type(piece).__name__} before; "
        "keep config.learners(add_default_connectors_to_learner_pipeline=True)."
    )


def use_fast_chunking(learner_pipeline: ConnectorPipelineV2) -> None:
    """Replaces RLlib's chunking pieces (and its bootstrap step's) in a Learner connector pipeline by the ones above, in place."""
    replacements = {
        AddTimeDimToBatchAndZeroPad: ZeroPadToChunks,
        AddStatesFromEpisodesToBatch: AddChunkStartStates,
        AddOneTsToEpisodesAndTruncate: AddBootstrapStep,
    }
    for index, piece in enumerate(learner_pipeline.connectors):
        if type(piece) in replacements:
            learner_pipeline.connectors[index] = replacements[type(piece)](
                piece.input_observation_space, piece.input_action_space, as_learner_connector=True
            )
