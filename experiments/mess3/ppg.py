"""The reward_only recipe trained by Phasic Policy Gradient instead of PPO.

    ./bazelw run //experiments/mess3:ppg -- --smoke
    ./bazelw run //experiments/mess3:ppg                                   # reward_only's budget
    ./bazelw run //experiments/mess3:ppg -- --set ppg/beta_clone=3.0       # what ppg_tuning varies

The composition pattern again (compare iqn_critic.py): the science of controlled Mess3 comes from
controlled_mess3.py unchanged; swapped are the algorithm (`PPGConfig` from rl.learners: PPO plus an
auxiliary phase every `policy_iterations_per_aux` updates, with its own PPGTorchLearner) and the
module (`PPGTransformerModel`: `PPGAuxiliaryValueHead` on `TransformerModel`). One network, the
seed project's detach design: in policy phases the value head reads the encoder detached, so
PPO's value loss does not shape it; in the auxiliary phases an auxiliary value head trains it,
under a policy-cloning KL. The question it adds (critic_study): with the value loss moved out of
the policy phase, does the agent act on the belief more reliably, and does the residual stream
encode it more or less than under PPO?

`--set ppg/beta_clone` weighs the cloning KL; `--set ppg/value_coefficient` both auxiliary value
losses (the auxiliary head's and the true value head's), half-MSE on gamma-0.9 returns of order
1-10. Their defaults are ppg_tuning's choice on seeds 100-102 (README.md, "The critic study"):
beta_clone 3 (the paper's 1) and value coefficient 0.1 (the paper's 1).
"""

from experiments.mess3.task import controlled_mess3 as task
from experiments.mess3.task import stages
from rl.harness import Hyperparameters, Range
from rl.learners import PPGConfig
from rl.learners.ppg import PPGTransformerModel

# ppg_tuning's best greedy normalised value, 0.48 [0.24, 0.72] over 3 seeds at 2^18 env steps
# (study 20261205T133213Z-5849fa in checks/results/studies/; the paper's 1 and 1 gave 0.44 [-0.12, 1.00]).
PPG_HYPERPARAMETERS = {"ppg/beta_clone": 3.0, "ppg/value_coefficient": 0.1}
HYPERPARAMETERS = Hyperparameters(
    {**task.PPO_HYPERPARAMETERS, **task.TRANSFORMER_HYPERPARAMETERS, **PPG_HYPERPARAMETERS},
    check=task.check_transformer_hyperparameters,
    ranges={**task.HYPERPARAMETER_RANGES, **{key: Range(0) for key in PPG_HYPERPARAMETERS}},
)

# Smoke: three updates, the auxiliary phase runs after the second. Full: reward_only's 512
# updates, an auxiliary phase every 16 (the paper's N_pi is 32 on far longer runs).
PPG_SCHEDULE = {
    True: {"policy_iterations_per_aux": 2, "aux_epochs": 2, "aux_minibatch_size": 512},
    False: {"policy_iterations_per_aux": 16, "aux_epochs": 6, "aux_minibatch_size": 1024},
}


def ppg_training(hyperparameters, *, smoke: bool) -> dict:
    """The PPGConfig.training arguments of a run: the phase schedule and the --set coefficients."""
    coefficient = hyperparameters["ppg/value_coefficient"]
    return {
        **PPG_SCHEDULE[smoke],
        "beta_clone": hyperparameters["ppg/beta_clone"],
        "aux_value_loss_coeff": coefficient,
        "aux_true_value_loss_coeff": coefficient,
    }


def run(context):
    model_config = task.transformer_config(context.hyperparameters)
    config = task.ppo_config(
        smoke=context.smoke,
        algorithm=PPGConfig,
        module_class=PPGTransformerModel,
        model_config=model_config,
        learner_class=None,
        hyperparameters=context.hyperparameters,
    ).training(**ppg_training(context.hyperparameters, smoke=context.smoke))
    return stages.run(
        context,
        config,
        budget=stages.MAIN_JOB,
        random_network=lambda seed: task.build_random_network(
            seed, module_class=PPGTransformerModel, model_config=model_config
        ),
    )


def probe_plan(smoke: bool):
    """For `bazel run //rl/analysis:probe -- <run-id>`: the plan the run probed itself with."""
    return task.probe_plan_for(smoke=smoke)
