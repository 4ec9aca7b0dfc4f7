"""How do beta_clone and the auxiliary value coefficients change PPG's learning curve on CartPole-v1?

    ./bazelw run //experiments/ppo_vs_ppg:ppg_tuning                # 18 runs, ~10 min on 2 cores
    ./bazelw run //experiments/ppo_vs_ppg:ppg_tuning -- --smoke

PPG on CartPole-v1 (comparison.py's settings: aux phase every 4 iterations, 6 aux epochs; value
coefficients 0.001 and beta_clone 1 unless the variant says otherwise), and PPO on the same seeds;
three seeds per variant from the stream "tuning_runs", so not the benchmark's seeds (settings
chosen here are then measured on other seeds by ppo_vs_ppg). The value losses are half-MSE in
return units (CartPole's returns reach 500), so their coefficients are reward-scale dependent;
beta_clone weighs the cloning KL that holds the policy while the auxiliary phase moves the
shared encoder.
"""

from experiments.ppo_vs_ppg import comparison

TASK = "CartPole-v1"
SEEDS = {False: 3, True: 1}
# Each variant states every setting it studies, so it does not move when comparison.py's defaults do.
VALUE_COEFFICIENTS = {"aux_value_loss_coeff": 0.001, "aux_true_value_loss_coeff": 0.001}
VARIANTS = {
    "beta_clone 1": {"beta_clone": 1.0, **VALUE_COEFFICIENTS},
    "beta_clone 3": {"beta_clone": 3.0, **VALUE_COEFFICIENTS},
    "beta_clone 10": {"beta_clone": 10.0, **VALUE_COEFFICIENTS},
    "value coefficients 0.01": {"beta_clone": 1.0, "aux_value_loss_coeff": 0.01, "aux_true_value_loss_coeff": 0.01},
    # The aux phase then only clones the policy onto itself: the detach design without auxiliary training.
    "no auxiliary value losses": {"beta_clone": 1.0, "aux_value_loss_coeff": 0.0, "aux_true_value_loss_coeff": 0.0},
}


def run(context):
    seeds = context.seeds.integers("tuning_runs", SEEDS[context.smoke])
    jobs = [comparison.Job(TASK, "PPO", seed) for seed in seeds]
    jobs += [comparison.Job(TASK, "PPG", seed, label=f"PPG, {label}", overrides=tuple(overrides.items()))
             for label, overrides in VARIANTS.items() for seed in seeds]
    return comparison.run_comparison(context, jobs, question="PPG on CartPole-v1: beta_clone and value coefficients")
