"""Episode metrics of a Learner and a local EnvRunner in one process: the env's episode length, learning unchanged.

RLlib's DebugCounterEnv ends every episode after exactly 15 steps, with reward t % 3 at step t:
length 15 and return 15 (five rounds of 1 + 2 + 0). Two envs and 10 env steps each per sample()
cut every episode: one chunk of 10 steps and one of 5, or 5 and 10 (no ray.init).
"""

import pytest
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.examples.envs.classes.debug_counter_env import DebugCounterEnv
from ray.rllib.utils.metrics import EPISODE_LEN_MAX, EPISODE_LEN_MEAN, EPISODE_LEN_MIN, EPISODE_RETURN_MEAN
from ray.rllib.utils.postprocessing.episodes import add_one_ts_to_episodes_and_truncate

from rl.harness.training import configs, episode_metrics, in_process, runners

EPISODE_LENGTH, EPISODE_RETURN = 15, 15.0
PARALLEL_ENVS = 2
BATCH = 20  # 10 steps per env: each sample() cuts the running episodes
ITERATIONS = 3  # episodes end in iterations 2 and 3, each after a chunk the previous update saw
REPORTED = (EPISODE_LEN_MEAN, EPISODE_LEN_MIN, EPISODE_LEN_MAX, EPISODE_RETURN_MEAN)


def _config():
    return (
        PPOConfig()
        .environment(DebugCounterEnv)
        .training(train_batch_size_per_learner=BATCH, minibatch_size=BATCH, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [8]})
    )


def _train() -> tuple[list[dict], list[dict]]:
    """(what the EnvRunner reported after each sample, each update's losses) of an in-process run."""
    with in_process.Trainer(_config(), env=DebugCounterEnv(), seed=3, parallel_envs=PARALLEL_ENVS) as trainer:
        reported = []
        get_metrics = trainer.env_runner.get_metrics

        def recording_get_metrics():  # the Trainer reads them once per iteration, before the update
            metrics = get_metrics()
            reported.append({key: in_process.scalar(metrics[key]) for key in REPORTED if key in metrics})
            return metrics

        trainer.env_runner.get_metrics = recording_get_metrics
        updates = list(trainer.train(runners.StopRule(training_iterations=ITERATIONS)))
    losses = [
        {key: in_process.scalar(value) for key, value in update.result[DEFAULT_MODULE_ID].items() if "loss" in key}
        for update in updates
    ]
    return reported, losses


@pytest.fixture(scope="module")
def with_copies():
    return _train()


@pytest.fixture(scope="module")
def rllib_alone():
    """The same run with the harness's callback switched off: RLlib's own counting."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(episode_metrics, "copy_cut_chunks", lambda **_: None)
        return _train()


def test_the_env_runner_reports_the_envs_episode_length_and_return(with_copies):
    reported, _ = with_copies
    assert reported[0] == {}  # no episode ended in the first 10 steps
    true = {
        EPISODE_LEN_MEAN: EPISODE_LENGTH,
        EPISODE_LEN_MIN: EPISODE_LENGTH,
        EPISODE_LEN_MAX: EPISODE_LENGTH,
        EPISODE_RETURN_MEAN: EPISODE_RETURN,
    }
    assert reported[1:] == [true] * (ITERATIONS - 1)


def test_rllib_alone_still_counts_the_bootstrap_step_that_the_learner_added_to_a_cut_chunk(rllib_alone):
    # If this fails, RLlib 2.56's EnvRunner no longer shares the chunks it keeps for metrics with the
    # Learner (or no longer passes `samples` as the list it returns): remove episode_metrics.py.
    reported, _ = rllib_alone
    assert [row.get(EPISODE_LEN_MEAN) for row in reported] == [None] + [EPISODE_LENGTH + 1] * (ITERATIONS - 1)
    assert [row.get(EPISODE_RETURN_MEAN) for row in reported] == [None] + [EPISODE_RETURN] * (ITERATIONS - 1)


def test_the_learner_learns_the_same_from_the_copies(with_copies, rllib_alone):
    (_, losses), (_, rllib_losses) = with_copies, rllib_alone
    assert losses == rllib_losses and len(losses) == ITERATIONS and losses[0]


def test_configure_adds_the_callback_after_the_recipes_own_and_once():
    def recipes_callback(**_):
        pass

    recipe_config = _config().callbacks(on_sample_end=recipes_callback)
    prepare = {"seed": 0, "parallel_envs": PARALLEL_ENVS, "profile": in_process.default_profile(), "in_process": True}
    config = configs.prepare_config(recipe_config, **prepare)
    assert config.callbacks_on_sample_end == [recipes_callback, episode_metrics.copy_cut_chunks]
    assert configs.prepare_config(config, **prepare).callbacks_on_sample_end == config.callbacks_on_sample_end
    assert recipe_config.callbacks_on_sample_end is recipes_callback  # the recipe's config is unchanged


def test_a_multi_agent_config_keeps_rllibs_callbacks():
    multi_agent = _config().multi_agent(policies={"a"}, policy_mapping_fn=lambda agent_id, episode, **_: "a")
    config = configs.prepare_config(
        multi_agent, seed=0, parallel_envs=PARALLEL_ENVS, profile=in_process.default_profile(), in_process=True
    )
    assert config.callbacks_on_sample_end is None


def _episode(*, terminated: bool) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[1.0, 2.0],
        infos=[{}, {"step": 1}, {"step": 2}],
        terminated=terminated,
        len_lookback_buffer=0,
    )


def test_a_running_chunk_is_replaced_by_a_copy_that_shares_its_info_dicts_and_an_ended_episode_is_kept():
    running, ended = _episode(terminated=False), _episode(terminated=True)
    samples = [ended, running]
    episode_metrics.copy_cut_chunks(env_runner=None, metrics_logger=None, samples=samples)
    copied = samples[1]
    assert samples[0] is ended and copied is not running
    assert (copied.id_, len(copied), copied.get_return()) == (running.id_, 2, 3.0)
    assert all(copy_info is info for copy_info, info in zip(copied.get_infos(), running.get_infos()))
    add_one_ts_to_episodes_and_truncate([copied])  # what PPO's learner connector does to each episode
    assert (len(copied), copied.is_truncated) == (3, True)
    assert (len(running), running.is_truncated) == (2, False)
