"""The belief question as one study: each Mess3 agent x 5 training seeds, scored on the task's exact references.

    ./bazelw run //experiments/mess3:belief_study -- --smoke              # every member at its smoke budget
    ./bazelw run //experiments/mess3:belief_study                         # the answer (README.md)
    ./bazelw run //experiments/mess3:belief_study -- --resume <study-id>  # after a stop: finished runs stay

Every member is the agent's ordinary recipe run with `--seed <seed>`; the scores are paths into
what `stages.run` returns (summary.json's outcome). The oracle rung is the same PPO on the exact
belief with its own value network (oracle_belief_separate_critic: the shared critic held the
oracle at 0.6-0.95, README.md). Scores: the normalised gamma-0.9 value of the final
policy, greedy and sampled (control_scores: 0 = best memoryless, 1 = belief-optimal), its
normalised episode return, and the held-out R^2 of the belief probe in block 1 against random
networks of the same architecture (belief_geometry). reward_only - memoryless_agent is the paired
difference that says whether memory is used for control.
"""

from experiments.mess3.task import stages
from rl.harness import Study

STUDY = Study(
    agents={  # cheapest first: a stopped study has its baselines
        "oracle_belief": "experiments.mess3.oracle_belief_separate_critic",
        "memoryless": "experiments.mess3.memoryless_agent",
        "reward_only": "experiments.mess3.reward_only",
        "next_token_aux": "experiments.mess3.next_token_aux",
    },
    seeds=(0, 1, 2, 3, 4),
    scores=stages.CONTROL_SCORES + stages.block_1_probe_scores(),
    pairs=(("reward_only", "memoryless"), ("oracle_belief", "reward_only"), ("next_token_aux", "reward_only")),
)
