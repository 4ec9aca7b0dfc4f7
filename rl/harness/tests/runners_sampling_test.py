"""The runners' sampling plan: a recipe's parallel envs checked against its train batch, placed by the profile (no Ray)."""

import types

import pytest
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl.harness.errors import UsageError
from rl.harness.tests import contexts
from rl.harness.training import configs, hardware, lifecycle, sampling_connectors
from rl.harness.training.batched_env_runner import BatchedEnvRunner


def _config(batch: int):
    return PPOConfig().environment("CartPole-v1").training(train_batch_size_per_learner=batch, minibatch_size=64)


def test_a_recipes_parallel_envs_land_in_the_local_runner_on_two_cores():
    config = configs.prepare_config(_config(2048), seed=3, profile=contexts.machine_profile(2), parallel_envs=32)
    assert (config.num_env_runners, config.num_envs_per_env_runner, config.seed) == (0, 32, 3)


def test_the_recipes_config_is_not_changed():
    recipe_config = _config(2048)
    configs.prepare_config(recipe_config, seed=3, profile=contexts.machine_profile(8), parallel_envs=32)
    assert (recipe_config.num_env_runners, recipe_config.num_envs_per_env_runner) == (2, 1)  # RLlib's PPO defaults


@pytest.mark.parametrize(("batch", "expected"), [(2048, 16), (1000, 10), (4000, 16), (7, 7), (17, 1)])
def test_without_a_choice_the_largest_divisor_of_the_batch_up_to_the_default(batch, expected):
    assert configs.plan_sampling(contexts.machine_profile(2), _config(batch)).parallel_envs == expected


def test_more_parallel_envs_than_the_batch_fails_with_the_fix():
    with pytest.raises(
        configs.ParallelEnvsError, match=r"parallel_envs=64 is more than the train batch of 32 env steps allows.*<= 32"
    ):
        configs.plan_sampling(contexts.machine_profile(2), _config(32), parallel_envs=64)


def test_a_batch_that_is_not_a_multiple_of_parallel_envs_fails_naming_what_rllib_would_do():
    with pytest.raises(configs.ParallelEnvsError, match=r"not a multiple of parallel_envs=48: RLlib would sample 2064"):
        configs.plan_sampling(contexts.machine_profile(2), _config(2048), parallel_envs=48)


@pytest.mark.parametrize("parallel_envs", [0, True, 4.0])
def test_parallel_envs_must_be_a_positive_integer(parallel_envs):
    with pytest.raises(configs.ParallelEnvsError, match="parallel_envs must be an integer >= 1"):
        configs.plan_sampling(contexts.machine_profile(2), _config(2048), parallel_envs=parallel_envs)


def test_prepared_configs_sample_through_the_fast_module_to_env_pipeline_and_say_so():
    profile = contexts.machine_profile(2)
    config = configs.prepare_config(_config(2048), seed=3, profile=profile, parallel_envs=32)
    assert not config.add_default_connectors_to_module_to_env_pipeline
    assert not config.add_default_connectors_to_env_to_module_pipeline
    record = configs.sampling_record(configs.plan_sampling(profile, config, parallel_envs=32), config)
    assert record["connectors"] == {
        "env_to_module": sampling_connectors.FAST_PIPELINE,
        "module_to_env": sampling_connectors.FAST_PIPELINE,
    }
    assert record["num_envs_per_env_runner"] == 32


@pytest.mark.parametrize("cpus", [2, 8])
def test_single_agent_configs_sample_with_the_batched_env_runner_unless_told_rllibs(cpus):
    batched = configs.prepare_config(_config(2048), seed=3, profile=contexts.machine_profile(cpus), parallel_envs=32)
    rllib = configs.prepare_config(
        _config(2048), seed=3, profile=contexts.machine_profile(cpus, hardware.RLLIB_ENV_RUNNER), parallel_envs=32
    )
    assert batched.env_runner_cls is BatchedEnvRunner and rllib.env_runner_cls is None
    records = [
        configs.sampling_record(configs.plan_sampling(contexts.machine_profile(cpus), config, parallel_envs=32), config)
        for config in (batched, rllib)
    ]
    assert [record["env_runner"] for record in records] == ["batched", "rllib"]


def test_a_recipes_own_env_runner_is_kept_and_recorded_by_name():
    class OwnRunner(SingleAgentEnvRunner):
        pass

    config = configs.prepare_config(
        _config(2048).env_runners(env_runner_cls=OwnRunner),
        seed=3,
        profile=contexts.machine_profile(2),
        parallel_envs=32,
    )
    assert config.env_runner_cls is OwnRunner
    assert (
        configs.sampling_record(configs.plan_sampling(contexts.machine_profile(2), config, parallel_envs=32), config)[
            "env_runner"
        ]
        == "OwnRunner"
    )


def test_an_unknown_env_runner_names_the_choices():
    with pytest.raises(hardware.HardwareError, match="unknown --env-runner 'fast'; use one of batched, rllib"):
        contexts.machine_profile(2, "fast")


def test_a_recipes_own_module_to_env_pieces_are_kept_and_recorded():
    own_pieces = _config(2048).env_runners(module_to_env_connector=lambda env, spaces=None: [])
    config = configs.prepare_config(own_pieces, seed=3, profile=contexts.machine_profile(2), parallel_envs=32)
    assert config.add_default_connectors_to_module_to_env_pipeline
    record = configs.sampling_record(
        configs.plan_sampling(contexts.machine_profile(2), config, parallel_envs=32), config
    )
    assert record["connectors"] == {
        "env_to_module": sampling_connectors.FAST_PIPELINE,
        "module_to_env": sampling_connectors.CUSTOM_PIPELINE,
    }


def test_rllibs_runner_keeps_episodes_that_stay_in_the_process_as_lists_and_those_that_travel_numpy():
    local = configs.prepare_config(
        _config(2048), seed=3, profile=contexts.machine_profile(2, hardware.RLLIB_ENV_RUNNER), parallel_envs=32
    )
    remote = configs.prepare_config(_config(2048), seed=3, profile=contexts.machine_profile(8), parallel_envs=32)
    remote_learner = configs.prepare_config(
        _config(2048).learners(num_learners=1),
        seed=3,
        profile=contexts.machine_profile(2, hardware.RLLIB_ENV_RUNNER),
        parallel_envs=32,
    )
    assert (local.num_env_runners, local.episodes_to_numpy) == (0, False)
    assert remote.num_env_runners > 0 and remote.episodes_to_numpy
    assert remote_learner.num_env_runners == 0 and remote_learner.episodes_to_numpy  # they travel to the Learner
    record = configs.sampling_record(configs.plan_sampling(contexts.machine_profile(2), local, parallel_envs=32), local)
    assert record["episodes_to_numpy"] is False
    # The batched EnvRunner's episodes are numpy wherever they go, and the record says so.
    batched = configs.prepare_config(_config(2048), seed=3, profile=contexts.machine_profile(2), parallel_envs=32)
    assert (
        batched.episodes_to_numpy
        and configs.sampling_record(
            configs.plan_sampling(contexts.machine_profile(2), batched, parallel_envs=32), batched
        )["episodes_to_numpy"]
        is True
    )


def test_the_preparation_plans_once_and_again_only_for_another_profile(monkeypatch):
    planned_for = []
    place = hardware.place_envs
    monkeypatch.setattr(
        hardware,
        "place_envs",
        lambda profile, envs, **options: planned_for.append(profile.num_cpus) or place(profile, envs, **options),
    )
    preparation = configs.Preparation(
        contexts.machine_profile(2), {"main": configs.ConfigRequest(_config(2048), 32, seed=3)}
    )
    assert planned_for == [2]  # before anything starts: a bad parallel_envs fails here
    prepared = preparation.configs_for(contexts.machine_profile(2))["main"]
    assert planned_for == [2] and (prepared.config.seed, prepared.sampling["placement"]) == (3, "local")
    assert prepared.determinism["expected"] is True
    on_cluster = preparation.configs_for(hardware.on_cluster(contexts.machine_profile(2), 9))["main"]
    assert planned_for == [2, 9] and on_cluster.plan.num_env_runners == 8
    assert on_cluster.determinism["expected"] is False


class _RecordingRunner(lifecycle.Runner):
    def __init__(self, parallel_envs):
        self.parallel_envs, self.started = parallel_envs, False

    def requests(self, context):
        return {lifecycle.MAIN: configs.ConfigRequest(_config(2048), self.parallel_envs, seed=0)}

    def start(self, context):
        self.started = True
        raise AssertionError("started despite a bad parallel_envs")

    def build(self, context, prepared):
        raise AssertionError("built despite a bad parallel_envs")

    def train(self, context):
        yield from ()


def test_a_bad_parallel_envs_is_a_usage_error_before_the_runner_starts():
    runner = _RecordingRunner(parallel_envs=48)
    with pytest.raises(UsageError, match="not a multiple of parallel_envs=48"):
        next(lifecycle.run(types.SimpleNamespace(hardware=contexts.machine_profile(2)), runner), None)
    assert not runner.started


class _PipelinedConfig(PPOConfig):
    pipelined = True  # what rl.learners.pipelined.PipelinedPPOConfig says (the harness reads only the attribute)


def test_a_pipelined_config_samples_in_one_remote_runner_on_two_cores_and_records_it():
    config = (
        _PipelinedConfig().environment("CartPole-v1").training(train_batch_size_per_learner=2048, minibatch_size=64)
    )
    prepared = configs.prepare(configs.ConfigRequest(config, 32, seed=3), contexts.machine_profile(2))
    assert (prepared.config.num_env_runners, prepared.config.num_envs_per_env_runner) == (1, 32)
    assert prepared.sampling["pipelined"] is True and prepared.sampling["placement"] == "remote"
    assert prepared.determinism["expected"] is True and "pipelined" in prepared.determinism["why"]
    assert (
        configs.prepare(configs.ConfigRequest(_config(2048), 32, seed=3), contexts.machine_profile(2)).sampling[
            "pipelined"
        ]
        is False
    )
    with pytest.raises(configs.ParallelEnvsError, match="pipelined config needs remote EnvRunners"):
        configs.plan_sampling(contexts.machine_profile(2), config, 32, in_process=True)
