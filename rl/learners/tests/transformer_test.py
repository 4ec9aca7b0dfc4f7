"""TransformerModel: chunked training equals step-by-step rollout, window semantics, residual stream."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from rl.learners import ActorCriticPPOTorchLearner
from rl.learners.models import TransformerModel
from rl.learners.models.transformer import ROWS_PER_INFERENCE_PIECE

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = gym.spaces.Discrete(4)
SMALL = {"d_model": 16, "n_heads": 2, "n_layers": 2, "feedforward_dim": 32, "memory_len": 5, "max_seq_len": 8}
TOLERANCE = 1e-5


def transformer(**overrides):
    torch.manual_seed(0)
    return TransformerModel(observation_space=OBS_SPACE, action_space=ACTIONS, model_config={**SMALL, **overrides})


def concatenated(states):
    """Concatenates module states (encoder name -> key -> tensor) along the batch axis."""
    return {name: {key: torch.cat([s[name][key] for s in states]) for key in states[0][name]} for name in states[0]}


def step_by_step(module, obs):
    """Per-step logits (B, T, A), values (B, T) and the state after each step."""
    state = module.batched_initial_state(obs.shape[0])
    logits, values, states = [], [], []
    for t in range(obs.shape[1]):
        batch = {Columns.OBS: obs[:, t : t + 1], Columns.STATE_IN: state}
        out = module.forward_exploration(batch)
        with torch.no_grad():
            values.append(module.compute_values(batch)[:, 0])
        logits.append(out[Columns.ACTION_DIST_INPUTS][:, 0])
        state = out[Columns.STATE_OUT]
        states.append(state)
    return torch.stack(logits, 1), torch.stack(values, 1), states


@pytest.mark.parametrize("vf_share_layers", [True, False])
def test_chunked_training_forward_equals_step_by_step_rollout(vf_share_layers):
    module = transformer(vf_share_layers=vf_share_layers)
    batch_size, length, chunk = 3, 21, SMALL["max_seq_len"]
    obs = torch.randn(batch_size, length, 3)
    rollout_logits, rollout_values, states = step_by_step(module, obs)

    # Cut like RLlib: chunks of max_seq_len, the last zero-padded, STATE_IN = state before the chunk.
    padded = torch.cat([obs, torch.zeros(batch_size, 3 * chunk - length, 3)], 1)
    starts = range(0, length, chunk)
    chunk_obs = torch.cat([padded[:, s : s + chunk] for s in starts])
    initial = module.batched_initial_state(batch_size)
    state_in = concatenated([initial if s == 0 else states[s - 1] for s in starts])
    batch = {Columns.OBS: chunk_obs, Columns.STATE_IN: state_in}
    out = module.forward_train(batch)
    values = module.compute_values(batch, embeddings=out[Columns.EMBEDDINGS])

    def unchunk(x):  # (len(starts) * B, chunk, ...) -> (B, length, ...)
        return torch.cat(x.split(batch_size), 1)[:, :length]

    assert (unchunk(out[Columns.ACTION_DIST_INPUTS]) - rollout_logits).abs().max() < TOLERANCE
    assert (unchunk(values) - rollout_values).abs().max() < TOLERANCE


def test_a_step_attends_to_itself_and_exactly_memory_len_steps_before():
    module = transformer(n_layers=1, memory_len=3)
    obs = torch.randn(1, 8, 3)
    baseline = module.residual_stream(obs).activations[-1, 0, 6]
    too_far, in_window = obs.clone(), obs.clone()
    too_far[0, 2] += 1.0  # distance 4 from step 6
    in_window[0, 3] += 1.0  # distance 3
    assert torch.equal(module.residual_stream(too_far).activations[-1, 0, 6], baseline)
    assert (module.residual_stream(in_window).activations[-1, 0, 6] - baseline).abs().max() > 1e-3


def test_residual_stream_in_a_batch_equals_step_by_step():
    module = transformer()
    obs = torch.randn(2, 13, 3)
    with torch.no_grad():
        whole = module.residual_stream(obs)
        state, steps = None, []
        for t in range(13):
            step = module.residual_stream(obs[:, t : t + 1], state)
            steps.append(step.activations)
            state = step.state_out
    assert whole.activations.shape == (SMALL["n_layers"] + 1, 2, 13, SMALL["d_model"])
    assert (torch.cat(steps, dim=2) - whole.activations).abs().max() < TOLERANCE
    # The state has the same size at every episode position: a step costs the same anywhere.
    assert state["keys"].shape == (2, SMALL["n_layers"], SMALL["memory_len"], SMALL["d_model"])
    with pytest.raises(ValueError, match=r"encoder must be one of \['encoder', 'critic_encoder'\]"):
        module.residual_stream(obs, encoder="decoder")


def test_training_and_rollout_attention_paths_agree():
    # With gradients the blocks attend explicitly; without (rollouts, GAE) through
    # scaled_dot_product_attention. Both must give the same outputs.
    module = transformer(vf_share_layers=True)
    obs = torch.randn(4, SMALL["max_seq_len"], 3)
    state = module.batched_initial_state(4)
    state["encoder"]["valid"][:, 2:] = 1.0
    state["encoder"]["keys"].normal_()
    state["encoder"]["values"].normal_()
    batch = {Columns.OBS: obs, Columns.STATE_IN: state}
    with_gradients = module.forward_train(batch)[Columns.ACTION_DIST_INPUTS]
    assert with_gradients.requires_grad
    with torch.no_grad():
        without = module.forward_train(batch)[Columns.ACTION_DIST_INPUTS]
    assert (with_gradients - without).abs().max() < TOLERANCE


def test_a_large_batch_without_gradients_gives_the_same_outputs_in_pieces():
    # GAE's value pass: more than ROWS_PER_INFERENCE_PIECE steps, encoded piece by piece.
    encoder = transformer().encoder
    chunks = ROWS_PER_INFERENCE_PIECE // SMALL["max_seq_len"] + 5
    obs = torch.randn(chunks, SMALL["max_seq_len"], 3)
    cache_shape = (chunks, SMALL["n_layers"], SMALL["memory_len"], SMALL["d_model"])
    cache = {
        "keys": torch.randn(cache_shape),
        "values": torch.randn(cache_shape),
        "valid": torch.rand(chunks, 5).round(),
    }
    for state in (None, cache):
        whole_embeddings, whole_state = encoder(obs, state)  # with gradients: one pass
        with torch.no_grad():
            embeddings, state_out = encoder(obs, state)
        assert (embeddings - whole_embeddings).abs().max() < TOLERANCE
        for key, value in whole_state.items():
            assert (state_out[key] - value).abs().max() < TOLERANCE


@pytest.mark.parametrize("vf_share_layers", [True, False])
def test_gae_value_pass_equals_the_full_pass_up_to_each_seq_len(vf_share_layers):
    # Chunks of every length (more steps than one piece), each with its own state.
    module = transformer(vf_share_layers=vf_share_layers)
    chunks, length = ROWS_PER_INFERENCE_PIECE // 4 + 7, SMALL["max_seq_len"]
    seq_lens = torch.arange(chunks) % length + 1
    obs = torch.randn(chunks, length, 3) * (torch.arange(length) < seq_lens[:, None]).unsqueeze(-1)  # zero padding
    cache_shape = (chunks, SMALL["n_layers"], SMALL["memory_len"], SMALL["d_model"])
    state = {
        name: {
            "keys": torch.randn(cache_shape),
            "values": torch.randn(cache_shape),
            "valid": torch.rand(chunks, 5).round(),
        }
        for name in module.get_initial_state()
    }
    batch = {Columns.OBS: obs, Columns.STATE_IN: state, Columns.SEQ_LENS: seq_lens.float()}
    full = module.compute_values({Columns.OBS: obs, Columns.STATE_IN: state})  # with gradients: one full pass
    with torch.no_grad():
        values = module.compute_values(batch)
    valid = torch.arange(length) < seq_lens[:, None]
    assert (values - full)[valid].abs().max() < TOLERANCE  # the padding after seq_len: anything (GAE drops it)


def reference_encoder(encoder, obs, cached_keys, cached_values, cached_valid):
    """The encoder's embeddings, written out query by query and head by head from its documented semantics.

    Pre-LayerNorm blocks; each step attends to itself and the `memory_len` steps before it that
    are valid (the cache: positions 0..M-1, then the new steps), scores q.k / sqrt(head_dim) plus a
    learned bias per head and distance; then a GELU MLP; a final LayerNorm.
    """
    batch, length, _ = obs.shape
    memory, heads = encoder.memory_len, encoder.blocks[0].n_heads
    x = obs @ encoder.input_projection.weight.T + encoder.input_projection.bias
    valid = torch.cat([cached_valid > 0.5, torch.ones(batch, length, dtype=torch.bool)], dim=1)
    for layer, block in enumerate(encoder.blocks):
        width = x.shape[-1]
        head_dim = width // heads
        normed = torch.nn.functional.layer_norm(x, (width,), block.attention_norm.weight, block.attention_norm.bias)
        queries, keys, values = (normed @ block.qkv.weight.T + block.qkv.bias).split(width, dim=-1)
        keys = torch.cat([cached_keys[:, layer], keys], dim=1)
        values = torch.cat([cached_values[:, layer], values], dim=1)
        attended = torch.zeros(batch, length, width)
        for b in range(batch):
            for t in range(length):
                query_position = memory + t
                seen = [k for k in range(query_position + 1) if query_position - k <= memory and valid[b, k]]
                for h in range(heads):
                    part = slice(h * head_dim, (h + 1) * head_dim)
                    scores = torch.stack(
                        [
                            queries[b, t, part] @ keys[b, k, part] / head_dim**0.5
                            + block.distance_bias[h, query_position - k]
                            for k in seen
                        ]
                    )
                    weights = scores.softmax(dim=0)
                    attended[b, t, part] = sum(weight * values[b, k, part] for weight, k in zip(weights, seen))
        x = x + attended @ block.attention_out.weight.T + block.attention_out.bias
        normed = torch.nn.functional.layer_norm(x, (width,), block.mlp_norm.weight, block.mlp_norm.bias)
        hidden = torch.nn.functional.gelu(normed @ block.mlp[0].weight.T + block.mlp[0].bias)
        x = x + hidden @ block.mlp[2].weight.T + block.mlp[2].bias
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), encoder.final_norm.weight, encoder.final_norm.bias)


def test_the_encoder_equals_a_reference_transformer_written_step_by_step():
    encoder = transformer(vf_share_layers=True).encoder
    with torch.no_grad():
        for block in encoder.blocks:
            block.distance_bias.normal_()  # zero at initialisation: make every distance's bias count
    batch, length = 3, SMALL["max_seq_len"]
    obs = torch.randn(batch, length, 3)
    cache_shape = (batch, SMALL["n_layers"], SMALL["memory_len"], SMALL["d_model"])
    state = {
        "keys": torch.randn(cache_shape),
        "values": torch.randn(cache_shape),
        "valid": torch.tensor([[0.0] * 5, [0.0, 0.0, 1.0, 1.0, 1.0], [1.0] * 5]),
    }
    with torch.no_grad():
        reference = reference_encoder(encoder, obs, state["keys"], state["values"], state["valid"])
        without_gradients, _ = encoder(obs, state)  # rollouts and GAE: scaled_dot_product_attention
    with_gradients, _ = encoder(obs, state, with_state=False)  # training: the explicit attention
    assert (without_gradients - reference).abs().max() < TOLERANCE
    assert (with_gradients - reference).abs().max() < TOLERANCE


def test_parameter_names_are_stable_so_old_checkpoints_load():
    names = set(transformer(n_layers=1, vf_share_layers=True).state_dict())
    block = [
        "attention_norm.weight", "attention_norm.bias", "qkv.weight", "qkv.bias", "attention_out.weight",
        "attention_out.bias", "distance_bias", "mlp_norm.weight", "mlp_norm.bias", "mlp.0.weight", "mlp.0.bias",
        "mlp.2.weight", "mlp.2.bias",
    ]  # fmt: skip
    assert names == {
        "encoder.input_projection.weight", "encoder.input_projection.bias",
        *(f"encoder.blocks.0.{name}" for name in block),
        "encoder.final_norm.weight", "encoder.final_norm.bias",
        "pi.weight", "pi.bias", "vf.linear.weight", "vf.linear.bias",
    }  # fmt: skip


def test_stateful_layout_and_rllib_keys():
    separate = transformer()
    shared = transformer(vf_share_layers=True)
    assert separate.is_stateful() and set(separate.get_initial_state()) == {"encoder", "critic_encoder"}
    assert set(shared.get_initial_state()) == {"encoder"}
    # A separate critic's state is collected while sampling, so EnvRunners keep it.
    assert separate.get_non_inference_attributes() == ["vf"]
    runner_module = TransformerModel(
        observation_space=OBS_SPACE, action_space=ACTIONS, inference_only=True, model_config=dict(SMALL)
    )
    assert hasattr(runner_module, "critic_encoder") and not hasattr(runner_module, "vf")
    default = TransformerModel(observation_space=OBS_SPACE, action_space=ACTIONS, model_config={})
    assert default.model_config["max_seq_len"] == 32  # written back for RLlib's connectors


def ppo_config(vf_share_layers=True, **training):
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=TransformerModel, model_config={**SMALL, "vf_share_layers": vf_share_layers}
            )
        )
        .training(**{"train_batch_size_per_learner": 128, "minibatch_size": 64, "num_epochs": 1, **training})
        .learners(learner_class=ActorCriticPPOTorchLearner)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
    )


@pytest.mark.parametrize("vf_share_layers", [True, False])
def test_rllib_learner_batch_reproduces_the_env_runner_outputs(vf_share_layers):
    config = ppo_config(vf_share_layers)
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    runner = SingleAgentEnvRunner(config=config)
    runner.module.set_state(learner.module[DEFAULT_MODULE_ID].get_state(inference_only=True))
    runner.sample(num_timesteps=60, random_actions=False)
    # The second sample continues cut episodes, so STATE_IN also comes from earlier chunks.
    episodes = runner.sample(num_timesteps=150, random_actions=False)
    connector = config.build_learner_connector(input_observation_space=None, input_action_space=None)
    batch = connector(rl_module=learner.module, batch={}, episodes=episodes, shared_data={})[DEFAULT_MODULE_ID]
    assert batch[Columns.OBS].shape[1] == SMALL["max_seq_len"]
    with torch.no_grad():
        out = learner.module[DEFAULT_MODULE_ID].forward_train(batch)
    mask = batch[Columns.LOSS_MASK]
    difference = (out[Columns.ACTION_DIST_INPUTS] - batch[Columns.ACTION_DIST_INPUTS])[mask]
    assert difference.numel() > 0 and difference.abs().max() < TOLERANCE


def test_learner_rejects_a_minibatch_that_is_not_whole_chunks():
    message = r"minibatch_size \(100\) must be a multiple of .*max_seq_len'\] \(8\).*minibatch_size=96"
    with pytest.raises(ValueError, match=message):
        ppo_config(minibatch_size=100).build_learner(env=gym.make("CartPole-v1"))


def test_a_separate_critic_reads_in_the_learner_the_state_the_env_runner_collected():
    # The EnvRunner's inference-only module keeps the critic encoder and runs it while sampling,
    # so each chunk's STATE_IN holds the critic's cache; the values the Learner computes from the
    # chunks (GAE's pass) must equal the critic's values run step by step from each episode's start.
    config = ppo_config(vf_share_layers=False)
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    module = learner.module[DEFAULT_MODULE_ID]
    runner = SingleAgentEnvRunner(config=config)
    runner.module.set_state(module.get_state(inference_only=True))
    assert hasattr(runner.module, "critic_encoder") and not hasattr(runner.module, "vf")
    earlier = {episode.id_: episode for episode in runner.sample(num_timesteps=60, random_actions=False)}
    episodes = runner.sample(num_timesteps=150, random_actions=False)  # continues the cut episodes
    connector = config.build_learner_connector(input_observation_space=None, input_action_space=None)
    continued = 0
    for episode in episodes:
        observations = np.asarray(episode.get_observations())[:-1]  # the steps the chunk trains on
        history = observations
        if episode.id_ in earlier:  # a continuation: the critic's state comes from the earlier chunk
            history = np.concatenate([np.asarray(earlier[episode.id_].get_observations())[:-1], observations])
            continued += 1
        _, reference, _ = step_by_step(module, torch.as_tensor(history, dtype=torch.float32)[None])
        batch = connector(rl_module=learner.module, batch={}, episodes=[episode], shared_data={})[DEFAULT_MODULE_ID]
        with torch.no_grad():
            values = module.compute_values(batch)[batch[Columns.LOSS_MASK]]
        assert values.shape == (len(observations),)
        assert (values - reference[0, -len(observations) :]).abs().max() < TOLERANCE
    assert continued > 0
    learner.update(episodes=episodes)  # PPO trains both encoders from these batches
