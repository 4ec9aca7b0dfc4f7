"""The science shared by the Mess3 experiments: the controlled environment, the agent, PPO, the probes.

    from experiments.mess3.task import controlled_mess3 as task

    config = task.ppo_config(smoke=context.smoke)            # TransformerModel, ActorCriticPPOTorchLearner
    runners.run_direct(context, config, stop=..., parallel_envs=task.PARALLEL_ENVS)
    plan = task.probe_plan_for(smoke=context.smoke)          # what rl.analysis probes, and how much

The task is occupancy control on Mess3 (x=0.05, a=0.85; rl/envs/README.md): each step the agent
either lets the process run (action 0) or tilts the next-state distribution toward one state
(actions 1..3), earning 1 when the next hidden state is state 0, minus a KL penalty for the
tilt. It sees only the emitted token and its own previous action. One step ahead the tilt pays
only where P(state 0) > 0.68; over several steps (gamma 0.9) tilting toward state 0 always wins
with these default settings (README.md, "What a longer run showed"). Nothing in the loss asks
for the belief: PPO on the reward alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3.task.environment import ENV_KWARGS, ENV_NAME, A, X, make_env
from rl.analysis import ContextProbing, ProbePlan, RolloutProbing, random_network
from rl.analysis.probes import ProbeOptions
from rl.envs.hmm import belief_after
from rl.envs.mess3 import mess3_process
from rl.harness import Range
from rl.learners import ActorCriticPPOTorchLearner, PipelinedPPOConfig
from rl.learners.models import ConfigError, TransformerConfig, TransformerModel

# -- environment ---------------------------------------------------------------------------------

# ENV_KWARGS, ENV_NAME, make_env: task/environment.py (what a remote EnvRunner imports, kept light).
# The oracle's observation (oracle_belief_separate_critic.py): the exact belief over the current
# hidden state, all that the belief-optimal reference acts on, so memory is given rather than learned.
BELIEF_OBSERVATION = ("belief",)
# Envs stepping together (the policy's forward pass batched over them): a train batch of 2048
# (smoke 1024) is 32 envs x 64 (32) steps, so a full batch holds 32 whole 64-step episodes.
PARALLEL_ENVS = 32

# -- agent -----------------------------------------------------------------------------------------

# The MLP of the memoryless and oracle agents; one encoder, as the Transformer agent.
MLP_MODEL_CONFIG = {"hidden_sizes": (64, 64), "vf_share_layers": True}
# Small enough to train on two CPU cores; one shared encoder (the value loss shapes it too).
MODEL_CONFIG = {
    "d_model": 32,
    "n_heads": 2,
    "n_layers": 2,
    "feedforward_dim": 64,
    "memory_len": 16,
    "max_seq_len": 16,
    "vf_share_layers": True,
}


# What `--set` may change in a recipe (rl/harness/run/hyperparameters.py): PPO's hyperparameters in every
# Mess3 recipe that declares them, the Transformer's size in those with a Transformer. The scores
# stay on the task's gamma 0.9 (control_scores) whatever ppo/gamma trains with.
PPO_HYPERPARAMETERS = {
    "ppo/lr": 1e-3,
    "ppo/gamma": 0.9,
    "ppo/lambda": 0.9,
    "ppo/entropy_coeff": 0.01,
    "ppo/num_epochs": 4,
}
# Pipelined PPO (rl.learners.pipelined): sampling the next batch overlaps the update, one update of policy lag.
TRAINING_HYPERPARAMETERS = {"training/pipelined": False}
TRANSFORMER_HYPERPARAMETERS = {
    f"model/{key}": MODEL_CONFIG[key] for key in ("d_model", "n_heads", "n_layers", "feedforward_dim")
}
# The values each may take (Hyperparameters(ranges=...)): --set outside them is refused before the run.
HYPERPARAMETER_RANGES = {
    "ppo/lr": Range.positive(),
    "ppo/gamma": Range(0, 1),
    "ppo/lambda": Range(0, 1),
    "ppo/entropy_coeff": Range(0),
    "ppo/num_epochs": Range(1),
    **{key: Range(1) for key in TRANSFORMER_HYPERPARAMETERS},
}
# The seed project's Transformer, as --set values: what `bench_throughput --seed-size` times.
SEED_PROJECT_SIZE = {"model/d_model": 96, "model/n_heads": 4, "model/n_layers": 3, "model/feedforward_dim": 384}


def transformer_config(hyperparameters: Mapping[str, Any], base: Mapping[str, Any] | None = None) -> dict:
    """`base` (MODEL_CONFIG) with the model/* hyperparameters applied (the trained and the random networks')."""
    sizes = {
        key: hyperparameters.get(f"model/{key}", value)
        for key, value in MODEL_CONFIG.items()
        if f"model/{key}" in TRANSFORMER_HYPERPARAMETERS
    }
    return {**(base or MODEL_CONFIG), **sizes}


def check_transformer_hyperparameters(hyperparameters: Mapping[str, Any]) -> None:
    """The Transformer's own rules (TransformerConfig) on the model/* values, as `Hyperparameters(check=...)`:
    a ValueError naming the `--set` to type, before any record exists or Ray starts."""
    try:
        TransformerConfig(**transformer_config(hyperparameters))
    except ConfigError as error:
        fixes = " or ".join(
            f"--set model/{field}={value}"
            for field, value in error.fixes.items()
            if f"model/{field}" in TRANSFORMER_HYPERPARAMETERS
        )
        raise ValueError(f"the Transformer's {error.problem}" + (f"; type e.g. {fixes}" if fixes else "")) from None


def ppo_config(
    *,
    smoke: bool,
    algorithm=PPOConfig,
    module_class=TransformerModel,
    model_config=None,
    learner_class=ActorCriticPPOTorchLearner,
    learner_config=None,
    vf_loss_coeff: float = 0.5,
    observation: tuple[str, ...] = ENV_KWARGS["observation"],
    hyperparameters: Mapping[str, Any] | None = None,
):
    """PPO (or a PPO-based `algorithm` such as PPGConfig) on ENV_NAME with a TransformerModel-based module.

    The variants swap parts: iqn_critic the module and learner, ppg the algorithm and module
    (`learner_class=None` keeps the algorithm's own Learner), oracle_belief_separate_critic the module
    and observation.
    `hyperparameters` (a run's `context.hyperparameters`) may change the ppo/* hyperparameters, and
    `training/pipelined` (in recipes that declare it) trains PPO pipelined.
    """
    if (hyperparameters or {}).get("training/pipelined"):
        if algorithm is not PPOConfig:
            raise ValueError(f"training/pipelined applies to PPO only, not {algorithm.__name__}")
        algorithm = PipelinedPPOConfig
    ppo = {
        **PPO_HYPERPARAMETERS,
        **{key: value for key, value in (hyperparameters or {}).items() if key in PPO_HYPERPARAMETERS},
    }
    config = (
        algorithm()
        .environment(ENV_NAME, env_config={"observation": tuple(observation)})
        .rl_module(
            rl_module_spec=RLModuleSpec(module_class=module_class, model_config=dict(model_config or MODEL_CONFIG))
        )
        .training(
            lr=ppo["ppo/lr"],
            gamma=ppo["ppo/gamma"],  # 0.9: the reward is immediate; the tilt pays over the next few steps
            lambda_=ppo["ppo/lambda"],
            train_batch_size_per_learner=1024 if smoke else 2048,
            minibatch_size=256,  # a multiple of max_seq_len
            num_epochs=ppo["ppo/num_epochs"],
            entropy_coeff=ppo["ppo/entropy_coeff"],
            vf_loss_coeff=vf_loss_coeff,
        )
    )
    if learner_class is not None:
        config = config.learners(learner_class=learner_class)
    return config.learners(learner_config_dict=dict(learner_config or {}))


def build_random_network(seed: int, *, module_class=TransformerModel, model_config=None):
    """A freshly initialised module of the trained architecture (torch seeded with `seed`), in eval mode."""
    env = make_env()
    return random_network(
        lambda: module_class(
            observation_space=env.observation_space,
            action_space=env.action_space,
            model_config=dict(model_config or MODEL_CONFIG),
        ),
        seed,
    )


# -- probes: the adapters rl.analysis reads ---------------------------------------------------------


class PassiveContexts:
    """A ContextAdapter: every token context, fed as the env would after passive steps (action 0).

    The agent's observation sequence for tokens k1..km is [nothing yet, (k1, action 0), ...,
    (km, action 0)]: m + 1 steps, read at the last. The target is the exact belief after the
    tokens under the passive dynamics, from the stationary prior (as the env starts).
    """

    name = f"mess3(x={X},a={A}) passive contexts"
    num_tokens = 3
    target_name = "belief"

    def __init__(self):
        env = make_env()
        self._slices = env.observation_slices
        self._obs_dim = env.observation_space.shape[0]
        self._model = mess3_process(x=X, a=A)

    def observations(self, contexts: np.ndarray) -> np.ndarray:
        batch, length = contexts.shape
        obs = np.zeros((batch, length + 1, self._obs_dim), dtype=np.float32)
        tokens, actions = self._slices["tokens"], self._slices["previous_action"]
        steps = np.arange(1, length + 1)
        obs[np.arange(batch)[:, None], steps[None, :], tokens.start + contexts] = 1.0
        obs[:, 1:, actions.start + 0] = 1.0  # the passive action
        return obs

    def targets(self, contexts: np.ndarray) -> np.ndarray:
        return belief_after(self._model, contexts)


class ControlledEnv:
    """An EnvAdapter: episodes the policy plays in the controlled env; the target is the exact belief.

    `env_config`: the run's (its config's `env_config`), so the policy sees what it was trained on.
    """

    name = f"controlled_mess3(x={X},a={A},episode_length={ENV_KWARGS['episode_length']})"

    def __init__(self, env_config=None):
        self.env_config = dict(env_config or {})

    def make_env(self) -> gymnasium.Env:
        return make_env(self.env_config)

    def diagnostics(self, env, info):
        return {"belief": np.asarray(info["belief"]), "hidden_state": np.asarray(info["state"])}


def probe_plan_for(*, smoke: bool) -> ProbePlan:
    """Both distributions: passive uniform contexts (the representation itself) and on-policy rollouts."""
    if smoke:
        return ProbePlan(
            contexts=ContextProbing(PassiveContexts(), max_length=6, group_prefix_length=4, batch_size=512),
            rollouts=RolloutProbing(
                ControlledEnv(), target="belief", num_episodes=48, max_steps=ENV_KWARGS["episode_length"], batch_size=48
            ),
            options=ProbeOptions(num_bootstrap=200, num_permutations=20),
        )
    return ProbePlan(
        contexts=ContextProbing(PassiveContexts(), max_length=9, group_prefix_length=4, batch_size=2048),
        rollouts=RolloutProbing(
            ControlledEnv(), target="belief", num_episodes=256, max_steps=ENV_KWARGS["episode_length"], batch_size=64
        ),
        options=ProbeOptions(num_bootstrap=1000, num_permutations=100),
    )
