"""The fast EnvRunner connector pipelines: the episodes equal those of RLlib's own pipelines."""

import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.connectors.env_to_module import FlattenObservations
from ray.rllib.connectors.module_to_env import GetActions
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.utils.torch_utils import convert_to_torch_tensor

from rl.harness.tests.episodes import assert_equal_nests, assert_same_episodes
from rl.harness.training.sampling_connectors import (
    CUSTOM_PIPELINE,
    ENV_TO_MODULE,
    FAST_PIPELINE,
    MODULE_TO_ENV,
    RLLIB_PIPELINE,
    ModuleOutputsForVectorEnv,
    as_tensors,
    connector_pipelines,
    sample_categorical,
    use_fast_connectors,
)

ALL_RLLIB = {ENV_TO_MODULE: RLLIB_PIPELINE, MODULE_TO_ENV: RLLIB_PIPELINE}
ALL_FAST = {ENV_TO_MODULE: FAST_PIPELINE, MODULE_TO_ENV: FAST_PIPELINE}

# RLlib's default PPO module with an LSTM: a stateful module, so the env-to-module pipeline adds a
# time rank that the module-to-env pipeline must remove, and STATE_OUT goes back per episode.
LSTM = {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 8, "fcnet_hiddens": [16]}


def config_for(env: str, model_config=None, *, env_settings=None, **env_runner_settings) -> PPOConfig:
    return (
        PPOConfig()
        .environment(env, **(env_settings or {}))
        .rl_module(model_config=model_config or {"fcnet_hiddens": [16]})
        .env_runners(num_env_runners=0, num_envs_per_env_runner=4, **env_runner_settings)
        .debugging(seed=11)
    )


def sampled_episodes(
    config: PPOConfig, *, fast: bool, steps: int = 300, expected_pipelines=None, explore: bool = True
) -> list:
    config = config.copy(copy_frozen=False)
    pipelines = use_fast_connectors(config) if fast else connector_pipelines(config)
    assert pipelines == (expected_pipelines or (ALL_FAST if fast else ALL_RLLIB))
    torch.manual_seed(0)  # the runner seeds torch too; this makes the module's weights equal regardless
    runner = SingleAgentEnvRunner(config=config)
    try:
        # Two calls: the second continues episodes that the first cut.
        return runner.sample(num_timesteps=steps // 2, explore=explore) + runner.sample(
            num_timesteps=steps // 2, explore=explore
        )
    finally:
        runner.stop()


def test_stateful_module_episodes_match_rllib_pipeline():
    config = config_for("CartPole-v1", LSTM)
    expected, actual = sampled_episodes(config, fast=False), sampled_episodes(config, fast=True)
    assert any(episode.is_terminated for episode in expected), "the test needs episodes that end (autoreset rows)"
    assert Columns.STATE_OUT in expected[0].extra_model_outputs
    assert_same_episodes(expected, actual)


def test_greedy_sampling_takes_rllibs_deterministic_actions():
    config = config_for("CartPole-v1", LSTM)
    expected = sampled_episodes(config, fast=False, explore=False)
    assert_same_episodes(expected, sampled_episodes(config, fast=True, explore=False))


@pytest.mark.parametrize("normalize_actions, clip_actions", [(True, False), (False, True), (False, False)])
def test_box_actions_are_normalised_or_clipped_as_rllib_does(normalize_actions, clip_actions):
    # Pendulum's actions lie in [-2, 2]; raw Gaussian samples fall outside it, so the rewards
    # (computed from what the env received) tell unsquashing, clipping and neither apart.
    config = config_for(
        "Pendulum-v1", env_settings={"normalize_actions": normalize_actions, "clip_actions": clip_actions}
    )
    assert_same_episodes(sampled_episodes(config, fast=False), sampled_episodes(config, fast=True))


def test_a_pipeline_with_the_configs_own_pieces_keeps_them_the_other_is_fast():
    own_env_to_module = config_for(
        "CartPole-v1", LSTM, env_to_module_connector=lambda env, spaces, device: [FlattenObservations()]
    )
    expected = {ENV_TO_MODULE: CUSTOM_PIPELINE, MODULE_TO_ENV: FAST_PIPELINE}
    assert_same_episodes(
        sampled_episodes(
            own_env_to_module,
            fast=False,
            expected_pipelines={ENV_TO_MODULE: CUSTOM_PIPELINE, MODULE_TO_ENV: RLLIB_PIPELINE},
        ),
        sampled_episodes(own_env_to_module, fast=True, expected_pipelines=expected),
    )
    own_module_to_env = config_for("CartPole-v1", module_to_env_connector=lambda env, spaces=None: [GetActions()])
    assert use_fast_connectors(own_module_to_env) == {ENV_TO_MODULE: FAST_PIPELINE, MODULE_TO_ENV: CUSTOM_PIPELINE}
    assert own_module_to_env.add_default_connectors_to_module_to_env_pipeline
    no_defaults = config_for(
        "CartPole-v1",
        add_default_connectors_to_module_to_env_pipeline=False,
        add_default_connectors_to_env_to_module_pipeline=False,
    )
    assert use_fast_connectors(no_defaults) == {ENV_TO_MODULE: CUSTOM_PIPELINE, MODULE_TO_ENV: CUSTOM_PIPELINE}


def test_the_fast_env_to_module_pipeline_feeds_rllibs_module_to_env_pipeline():
    # A config whose own module-to-env pieces keep RLlib's per-item pipeline still gets the
    # fast env-to-module one: RLlib's unbatching must find the rows' episodes.
    config = config_for("CartPole-v1", LSTM, module_to_env_connector=lambda env, spaces=None: [])
    expected = {ENV_TO_MODULE: FAST_PIPELINE, MODULE_TO_ENV: CUSTOM_PIPELINE}
    rllib = sampled_episodes(config, fast=False, expected_pipelines={**expected, ENV_TO_MODULE: RLLIB_PIPELINE})
    assert_same_episodes(rllib, sampled_episodes(config, fast=True, expected_pipelines=expected))


def test_multi_agent_configs_stay_on_rllibs_pipelines():
    multi_agent = config_for("CartPole-v1").multi_agent(
        policies={"a", "b"}, policy_mapping_fn=lambda agent_id, episode, **kwargs: "a"
    )
    assert use_fast_connectors(multi_agent) == ALL_RLLIB


def test_is_idempotent():
    config = config_for("CartPole-v1")
    assert use_fast_connectors(config) == ALL_FAST
    assert use_fast_connectors(config) == ALL_FAST


def test_more_rows_than_episodes_is_a_clear_error():
    piece = ModuleOutputsForVectorEnv(normalize_actions=False, clip_actions=False)
    with pytest.raises(ValueError, match="3 module output rows for 2 episodes"):
        piece(
            rl_module=None,
            batch={Columns.ACTIONS: np.zeros(3, dtype=np.int64)},
            episodes=[object(), object()],
            shared_data={},
        )


@pytest.mark.parametrize("shape", [(32, 4), (32, 1, 4), (5, 2, 3)])
def test_categorical_draws_are_rllibs_from_the_same_random_numbers(shape):
    logits = torch.randn(*shape) * 3
    for seed in range(20):
        torch.manual_seed(seed)
        distribution = TorchCategorical.from_logits(logits)
        expected = distribution.sample()
        expected_logp = distribution.logp(expected)
        torch.manual_seed(seed)
        actions, logp = sample_categorical(logits)
        assert torch.equal(actions, expected) and torch.equal(logp, expected_logp)


def test_tensors_are_rllibs_conversion_on_the_cpu():
    data = {
        Columns.OBS: np.arange(6, dtype=np.float64).reshape(3, 2),
        Columns.STATE_IN: {
            "keys": np.ones((3, 2, 4), np.float32),
            "valid": np.zeros((3, 4), np.int64),
            "half": np.ones(3, np.float16),
        },
        "names": np.array(["a", "b"]),
    }
    tensors = as_tensors(data)
    assert_equal_nests(convert_to_torch_tensor(data), tensors, "tensors")
    assert all(torch.is_tensor(tensor) for tensor in (tensors[Columns.OBS], *tensors[Columns.STATE_IN].values()))
