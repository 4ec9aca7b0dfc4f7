"""How do beta_clone and the auxiliary value coefficients change PPG's learning curve on CartPole-v1?

    ./bazelw run //experiments/ppo_vs_ppg:ppg_tuning                # 9 settings x 3 seeds
    ./bazelw run //experiments/ppo_vs_ppg:ppg_tuning -- --smoke

PPG on CartPole-v1 (cartpole_ppg: aux phase every 4 iterations, 6 aux epochs) at every
combination of beta_clone and one coefficient for both auxiliary value losses; coefficient 0 is
the detach design without auxiliary value training (the phase then only clones the policy onto
itself). Seeds 100-102, not the benchmark's, so settings chosen here are measured on other seeds
by ppo_vs_ppg (whose cartpole_ppo is the PPO baseline). The value losses are half-MSE in return
units (CartPole's returns reach 500), so their coefficients are reward-scale dependent;
beta_clone weighs the cloning KL that holds the policy while the auxiliary phase moves the
shared encoder.
"""

from experiments.ppo_vs_ppg.task import stages
from rl.harness import Study

STUDY = Study(
    agents={"cartpole_ppg": "experiments.ppo_vs_ppg.cartpole_ppg"},
    seeds=(100, 101, 102),
    scores=stages.SCORES,
    hyperparameters={"ppg/beta_clone": (1.0, 3.0, 10.0), "ppg/value_coefficient": (0.0, 0.001, 0.01)},
)
