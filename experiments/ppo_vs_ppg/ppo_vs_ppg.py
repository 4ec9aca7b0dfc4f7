"""Does PPG learn faster than PPO at the same env-step budget, on a fully and a partially observed task?

    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg -- --smoke              # every member at its smoke budget
    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg                         # the benchmark (README.md)
    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg -- --resume <study-id>  # after a stop: finished runs stay

PPO and PPG on CartPole-v1 (100k env steps) and on Mess3 occupancy control (131,072 env steps),
each x 5 training seeds; a seed fixes the same initialisation stream for PPO and PPG, so each
pair is compared seed by seed. Every member is its recipe's ordinary run (`--seed <seed>`, in
its own process: its memory figures are its own); the scores are task/stages.py's SCORES.
"""

from experiments.ppo_vs_ppg.task import stages
from rl.harness import Study

STUDY = Study(
    agents={
        "cartpole_ppo": "experiments.ppo_vs_ppg.cartpole_ppo",
        "cartpole_ppg": "experiments.ppo_vs_ppg.cartpole_ppg",
        "mess3_ppo": "experiments.ppo_vs_ppg.mess3_ppo",
        "mess3_ppg": "experiments.ppo_vs_ppg.mess3_ppg",
    },
    seeds=(0, 1, 2, 3, 4),
    scores=stages.SCORES,
    pairs=(("cartpole_ppg", "cartpole_ppo"), ("mess3_ppg", "mess3_ppo")),
)
