"""How do beta_clone and the auxiliary value coefficient change PPG on controlled Mess3? (the ppg recipe's hyperparameters)

    ./bazelw run //experiments/mess3:ppg_tuning -- --smoke                 # every member at its smoke budget
    ./bazelw run //experiments/mess3:ppg_tuning                            # 6 settings x 3 seeds at 2^20 env steps
    ./bazelw run //experiments/mess3:ppg_tuning -- --stop-at-env-steps 262144   # a cheaper screen (recorded)

The ppg recipe (critic_study's PPG agent) at every combination of `ppg/beta_clone` (the weight
of the cloning KL that holds the policy while the auxiliary phase moves the shared encoder) and
`ppg/value_coefficient` (both auxiliary value losses, half-MSE on gamma-0.9 returns of order
1-10: 1 is the paper's, 0.1 weaker). Seeds 100-102, not critic_study's 0-9, so the setting
chosen here is measured there on other seeds (as ppo_vs_ppg's ppg_tuning on CartPole). Choose
on the greedy normalised value; set the chosen values as ppg.PPG_HYPERPARAMETERS' defaults
before critic_study runs, and record the tuning's study id in README.md.
"""

from experiments.mess3.task import stages
from rl.harness.study import Study

STUDY = Study(
    agents={"ppg": "experiments.mess3.ppg"},
    seeds=(100, 101, 102),
    scores=stages.CONTROL_SCORES + stages.block_1_probe_scores("policy_encoder"),
    hyperparameters={"ppg/beta_clone": (1.0, 3.0, 10.0), "ppg/value_coefficient": (0.1, 1.0)},
)
