"""PPO vs PPG on Mess3 occupancy control alone, where acting well needs the belief.

    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg_mess3              # 2 algorithms x 3 seeds
    ./bazelw run //experiments/ppo_vs_ppg:ppo_vs_ppg_mess3 -- --smoke

The Mess3Control half of ppo_vs_ppg (the same recipes), for a re-run after a change to the task
without re-running CartPole. Its runs also report their final return and AUC between the best
memoryless policy (0) and the belief-optimal one (1) (rl/envs/README.md).
"""

from experiments.ppo_vs_ppg.task import stages
from rl.harness import Study

STUDY = Study(
    agents={"mess3_ppo": "experiments.ppo_vs_ppg.mess3_ppo", "mess3_ppg": "experiments.ppo_vs_ppg.mess3_ppg"},
    seeds=(0, 1, 2),
    scores=stages.SCORES,
    pairs=(("mess3_ppg", "mess3_ppo"),),
)
