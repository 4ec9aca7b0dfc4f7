"""The two agents of ppo_vs_solver, their environments, and how their policies are valued.

    config = agents.ppo_config(agents.AGENTS["mlp_belief"], smoke=False)
    value = agents.discounted_value(module, agents.AGENTS["mlp_belief"], solution, episodes=64, horizon=3000, seed=0)

- "mlp_belief": an MLPModel reads the exact belief over the 256 machine states (what the solver
  acts on): how close does PPO get to the solver when the filtering is done for it?
- "transformer_symbol": a TransformerModel reads only what a controller sees, the observed symbol
  (one-hot of 0..16) and its own previous action (one-hot; the symbol means different things after
  operate and inspect): it must learn to filter as well as to act.
"""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.tune.registry import register_env

from rl.envs.cassandra_machine import CassandraMachineEnv
from rl.learners import ActorCriticPPOTorchLearner
from rl.learners.models import MLPModel, TransformerModel

EPISODE_LENGTH = 1000  # about the effective horizon 1 / (1 - 0.999)


class SymbolAndPreviousAction(gymnasium.ObservationWrapper):
    """One-hot of the observed symbol (17 values: 16 = nothing yet) and of the previous action (zeros at reset)."""

    def __init__(self, env: CassandraMachineEnv):
        super().__init__(env)
        self._symbols = env.observation_space.n
        self._actions = env.action_space.n
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (self._symbols + self._actions,), np.float32)
        self._previous_action = None

    def reset(self, **kwargs):
        self._previous_action = None
        return super().reset(**kwargs)

    def step(self, action):
        self._previous_action = int(action)
        return super().step(action)

    def observation(self, symbol):
        observation = np.zeros(self.observation_space.shape, np.float32)
        observation[int(symbol)] = 1.0
        if self._previous_action is not None:
            observation[self._symbols + self._previous_action] = 1.0
        return observation


def make_belief_env(env_config=None, *, episode_length: int = EPISODE_LENGTH) -> gymnasium.Env:
    return CassandraMachineEnv(observation="belief", episode_length=episode_length)


def make_symbol_env(env_config=None, *, episode_length: int = EPISODE_LENGTH) -> gymnasium.Env:
    return SymbolAndPreviousAction(CassandraMachineEnv(observation="symbol", episode_length=episode_length))


@dataclasses.dataclass(frozen=True)
class Agent:
    name: str
    env_name: str
    make_env: object
    module_class: type
    model_config: dict
    minibatch_size: int


AGENTS = {
    "mlp_belief": Agent(
        "mlp_belief",
        "experiments.cassandra_machine/belief",
        make_belief_env,
        MLPModel,
        {"hidden_sizes": [128, 64], "activation": "tanh", "vf_share_layers": False},
        500,
    ),
    "transformer_symbol": Agent(
        "transformer_symbol",
        "experiments.cassandra_machine/symbol",
        make_symbol_env,
        TransformerModel,
        {
            "d_model": 32,
            "n_heads": 2,
            "n_layers": 2,
            "feedforward_dim": 64,
            "memory_len": 32,
            "max_seq_len": 32,
            "vf_share_layers": True,
        },
        512,
    ),
}
for _agent in AGENTS.values():
    register_env(_agent.env_name, _agent.make_env)


def ppo_config(agent: Agent, *, smoke: bool):
    return (
        PPOConfig()
        .environment(agent.env_name)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=agent.module_class, model_config=dict(agent.model_config)))
        .training(
            lr=3e-4,
            gamma=0.999,  # the file's discount: the solver's value is the discounted return
            lambda_=0.95,
            train_batch_size_per_learner=2048 if smoke else 8192,
            minibatch_size=agent.minibatch_size * (1 if smoke else 2),
            num_epochs=4,
            entropy_coeff=0.01,
            vf_loss_coeff=0.5,
            vf_clip_param=1000.0,  # returns are in the hundreds
        )
        .learners(learner_class=ActorCriticPPOTorchLearner)
    )


def discounted_value(module, agent: Agent, solution, *, episodes: int, horizon: int, seed: int) -> dict:
    """Mean discounted return of `module`'s greedy policy from the start state, over `episodes` episodes.

    Each episode plays `horizon` steps (the env's own truncation is lifted); the remaining tail,
    discount**horizon of the total, is valued by the solver at the last belief, as in
    rl/envs/README.md's rollout of the solver's own policy (so with horizon 3000 the tail is 5 %).
    """
    envs = [agent.make_env(episode_length=horizon) for _ in range(episodes)]
    discount = envs[0].unwrapped.discount
    generator = np.random.SeedSequence(seed).generate_state(episodes).tolist()
    observations, infos = zip(*(env.reset(seed=int(s)) for env, s in zip(envs, generator)))
    observations, beliefs = list(observations), [info["belief"] for info in infos]
    state = module.batched_initial_state(episodes) if hasattr(module, "batched_initial_state") else {}
    returns = np.zeros(episodes)
    for step in range(horizon):
        obs = torch.as_tensor(np.stack(observations).astype(np.float32))[:, None]
        with torch.no_grad():
            out = module.forward_inference({Columns.OBS: obs, Columns.STATE_IN: state} if state else {Columns.OBS: obs})
        actions = out[Columns.ACTION_DIST_INPUTS].reshape(episodes, -1).argmax(dim=-1).numpy()
        state = out.get(Columns.STATE_OUT, {})
        for index, env in enumerate(envs):
            observations[index], reward, _, _, info = env.step(int(actions[index]))
            returns[index] += discount**step * reward
            beliefs[index] = info["belief"]
    tails = np.array([discount**horizon * solution.value(belief) for belief in beliefs])
    values = returns + tails
    return {
        "mean": float(values.mean()),
        "standard_error": float(values.std(ddof=1) / np.sqrt(episodes)),
        "episodes": episodes,
        "horizon": horizon,
        "tail_share": float(discount**horizon),
        "policy": "greedy",
    }
