"""Episode metrics that count the env's own steps, also when the Learner shares the EnvRunner's process.

    from rl.harness.training import episode_metrics

    config.callbacks(on_sample_end=[episode_metrics.copy_cut_chunks])   # configs.prepare does it for every run

RLlib 2.56's EnvRunners keep every chunk of a running episode that a `sample()` call cut, in the
private `_ongoing_episodes_for_metrics`, to add its length and return to the episode's once it
ends, and return that very object. The learner connector's AddOneTsToEpisodesAndTruncate (PPO,
APPO, IMPALA, MARWIL) appends a bootstrap step to each episode it gets. When the EnvRunner and
the Learner share a process (a local EnvRunner, num_env_runners=0, and a local Learner) nothing
copies the episodes in between, so an episode cut by n `sample()` calls reports n steps too many:
`env_runners/episode_len_mean` 65 for 64-step episodes. Its return is right (the bootstrap reward is 0).

`copy_cut_chunks` hands the caller (the Learner) copies of the cut chunks, so the EnvRunner's stay
as sampled; the Learner gets equal episodes, so it learns the same. A batch that cuts no episode
(Mess3's full runs: 2048 steps from 32 envs, 64-step episodes) copies nothing. Single-agent
configs only: a MultiAgentEnvRunner's episodes are other objects, and no recipe has one.

It relies on RLlib 2.56 returning the very list it passes to on_sample_end as `samples`;
tests/episode_metrics_test.py fails if that changes, or if RLlib stops sharing the chunks.
"""

from __future__ import annotations

import copy

ON_SAMPLE_END = "on_sample_end"


def copy_cut_chunks(*, samples: list, **_) -> None:
    """RLlib on_sample_end callback: replaces each single-agent episode in `samples` that has not ended by a copy."""
    samples[:] = [episode if episode.is_done else _copy(episode) for episode in samples]


def _copy(episode):
    """A deep copy of `episode` that shares its spaces and info dicts, which the Learner only reads.

    Copying those took 85% of the time for Mess3 chunks (a belief array in every info dict);
    sharing them, 32 chunks of 32 steps take 6 ms, against 440 ms to sample them (numpy episodes;
    a local runner's list episodes take about twice as long to copy).
    """
    shared = [episode.observation_space, episode.action_space, *episode.get_infos()]
    return copy.deepcopy(episode, {id(item): item for item in shared})
