"""The two tasks of the PPO vs PPG comparison, and each (task, algorithm)'s config.

    from experiments.ppo_vs_ppg.task import tasks

    config = tasks.config_for("Mess3Control", "PPG", smoke=False, overrides={"beta_clone": 3.0})
    tasks.settings_of("Mess3Control", "PPG", smoke=False)          # what such a run trains with (recorded)
    HYPERPARAMETERS = tasks.ppg_hyperparameters("CartPole-v1")     # in a PPG recipe: its --set keys
    tasks.ppg_overrides(context.hyperparameters)                   # -> the training overrides they mean

CartPole-v1 (fully observed; MLP 64x64; RLlib's tuned CartPole PPO hyperparameters) and Mess3
occupancy control (partially observed: the agent sees the last token and its previous action;
the controlled_mess3 task's env, TransformerModel and PPO hyperparameters unchanged). PPO is each
task's usual PPO (CartPole: separate critic encoder; Mess3: the task's shared encoder); PPG is
PPGConfig with the detach design (one encoder, PPGMLPModel / PPGTransformerModel), the same PPO
settings, and value coefficients tuned to the task's return scale (docs/ppg.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from rl.harness import Hyperparameters, Range

ALGORITHMS = ("PPO", "PPG")
NUM_ENVS_PER_RUN = 8


@dataclasses.dataclass(frozen=True)
class Task:
    """One benchmark task: its budgets, its PPO and PPG configs, its env, and reference policies."""

    env_steps: dict[bool, int]  # smoke -> env-step budget
    config: Callable[
        [str, bool], Any
    ]  # (algorithm, smoke) -> PPOConfig or PPGConfig (PPO's hyperparameters plus PPG's)
    make_env: Callable[[], Any]  # -> a gymnasium.Env
    reference_policies: dict[str, Callable[[Any, np.random.Generator], int]]  # name -> (env, rng) -> action
    ceiling: float | None = None  # the largest return an episode can earn, when known
    # -> an rl.analysis.scores.ScoreScale of the episode return, when exact references exist: runs
    # then also report their final return and AUC on it, and its two ends are reference lines
    score_scale: Callable[[], Any] | None = None


# -- CartPole-v1 ------------------------------------------------------------------------------------

CARTPOLE_TRAINING = {
    "lr": 3e-4,
    "train_batch_size_per_learner": 4000,
    "minibatch_size": 128,
    "num_epochs": 6,
    "entropy_coeff": 0.0,
}
CARTPOLE_SMOKE_TRAINING = {"train_batch_size_per_learner": 512, "num_epochs": 1}
# Returns of order 100-500: the aux value losses start near 1e3, so 0.001 keeps them of order 1 next
# to the cloning KL; beta_clone 10 then holds the policy through each phase (ppg_tuning: with
# beta_clone 1 returns dropped after phases, with coefficients 0.01 PPG did not learn; docs/ppg.md).
CARTPOLE_PPG = {
    "policy_iterations_per_aux": 4,
    "aux_epochs": 6,
    "aux_minibatch_size": 512,
    "aux_lr": 3e-4,
    "beta_clone": 10.0,
    "aux_value_loss_coeff": 0.001,
    "aux_true_value_loss_coeff": 0.001,
}
SMOKE_PPG = {"policy_iterations_per_aux": 2, "aux_epochs": 2}


def _cartpole(algorithm: str, smoke: bool):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rl.learners import ActorCriticPPOTorchLearner, PPGConfig
    from rl.learners.models import MLPModel
    from rl.learners.ppg import PPGMLPModel

    training = CARTPOLE_TRAINING | (CARTPOLE_SMOKE_TRAINING if smoke else {})
    if algorithm == "PPO":
        config = PPOConfig().learners(learner_class=ActorCriticPPOTorchLearner).training(**training)
        module_class, model_config = MLPModel, {"hidden_sizes": [64, 64], "vf_share_layers": False}
    else:
        config = PPGConfig().training(**training, **(CARTPOLE_PPG | (SMOKE_PPG if smoke else {})))
        module_class, model_config = PPGMLPModel, {"hidden_sizes": [64, 64], "vf_share_layers": True}
    return config.environment("CartPole-v1").rl_module(
        rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config)
    )


# -- Mess3 occupancy control ------------------------------------------------------------------------

# Returns are sums of per-step rewards in [-KL, 1] with gamma 0.9, so value targets are of order
# 1-10: the paper's coefficient 1 keeps the value terms of order 1 next to the cloning KL.
MESS3_PPG = {
    "policy_iterations_per_aux": 4,
    "aux_epochs": 6,
    "aux_minibatch_size": 1024,
    "aux_lr": 1e-3,
    "beta_clone": 1.0,
    "aux_value_loss_coeff": 1.0,
    "aux_true_value_loss_coeff": 1.0,
}


def _mess3(algorithm: str, smoke: bool):
    from experiments.mess3.task import controlled_mess3
    from rl.learners import PPGConfig
    from rl.learners.ppg import PPGTransformerModel

    if algorithm == "PPO":
        return controlled_mess3.ppo_config(smoke=smoke)
    return controlled_mess3.ppo_config(
        smoke=smoke, algorithm=PPGConfig, module_class=PPGTransformerModel, learner_class=None
    ).training(**(MESS3_PPG | (SMOKE_PPG if smoke else {})))


def _cartpole_env():
    import gymnasium

    return gymnasium.make("CartPole-v1")


def _mess3_env():
    from experiments.mess3.task import controlled_mess3

    return controlled_mess3.make_env()


def _mess3_scale():
    from experiments.mess3.task import control_scores

    return control_scores.scales()["episode_return"]  # 0: best memoryless policy, 1: belief-optimal


TASKS = {
    "CartPole-v1": Task(
        env_steps={False: 100_000, True: 1_024},
        config=_cartpole,
        make_env=_cartpole_env,
        reference_policies={"uniform random": lambda env, rng: int(rng.integers(2))},
        ceiling=500.0,
    ),
    "Mess3Control": Task(
        # 64 updates of 2048; PPO passes the best memoryless return by about 100k steps (README.md)
        env_steps={False: 131_072, True: 2_048},
        config=_mess3,
        make_env=_mess3_env,
        # Action 0 lets the process run; action 1 + j tilts toward state j (the target is state 0).
        reference_policies={
            "passive": lambda env, rng: 0,
            "always tilt to state 0": lambda env, rng: 1,
            "uniform random": lambda env, rng: int(rng.integers(4)),
        },
        score_scale=_mess3_scale,
    ),
}


def config_for(task: str, algorithm: str, *, smoke: bool, overrides: dict | None = None):
    """The AlgorithmConfig of one run: the task's settings, then `overrides` (training keys).

    Sampling (NUM_ENVS_PER_RUN envs in one local EnvRunner) and the seed are the in-process runner's
    (stages.run).
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {sorted(TASKS)}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    config = TASKS[task].config(algorithm, smoke)
    if overrides:
        config = config.training(**overrides)
    return config


SETTING_KEYS = (
    "lr",
    "gamma",
    "lambda_",
    "train_batch_size_per_learner",
    "minibatch_size",
    "num_epochs",
    "entropy_coeff",
    "vf_loss_coeff",
    "clip_param",
    "policy_iterations_per_aux",
    "aux_epochs",
    "aux_minibatch_size",
    "aux_lr",
    "beta_clone",
    "aux_value_loss_coeff",
    "aux_true_value_loss_coeff",
)


def settings_of(task: str, algorithm: str, *, smoke: bool, overrides: dict | None = None) -> dict[str, Any]:
    """What a run of (task, algorithm) trains with: budget, module, learner and the settings that differ by task."""
    config = config_for(task, algorithm, smoke=smoke, overrides=overrides)
    spec = config.rl_module_spec
    settings = {
        "env_steps": TASKS[task].env_steps[smoke],
        "num_envs": NUM_ENVS_PER_RUN,
        "module": _qualified_name(spec.module_class),
        "model_config": dict(spec.model_config or {}),
        "learner": _qualified_name(config.learner_class),
    }
    settings.update({key: getattr(config, key) for key in SETTING_KEYS if hasattr(config, key)})
    return settings


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# The PPG hyperparameters a study varies (ppg_tuning), as --set hyperparameters of the PPG recipes; both
# auxiliary value losses (the auxiliary head's and the true value head's) take one coefficient.
_PPG_TUNED = {"CartPole-v1": CARTPOLE_PPG, "Mess3Control": MESS3_PPG}


def ppg_hyperparameters(task: str) -> Hyperparameters:
    """`ppg/beta_clone` and `ppg/value_coefficient`, defaulting to `task`'s tuned settings."""
    tuned = _PPG_TUNED[task]
    return Hyperparameters(
        {"ppg/beta_clone": tuned["beta_clone"], "ppg/value_coefficient": tuned["aux_value_loss_coeff"]},
        ranges={"ppg/beta_clone": Range(0), "ppg/value_coefficient": Range(0)},
    )


def ppg_overrides(hyperparameters: dict[str, Any]) -> dict[str, float]:
    """The `AlgorithmConfig.training` keys that the PPG hyperparameters set."""
    coefficient = hyperparameters["ppg/value_coefficient"]
    return {
        "beta_clone": hyperparameters["ppg/beta_clone"],
        "aux_value_loss_coeff": coefficient,
        "aux_true_value_loss_coeff": coefficient,
    }
