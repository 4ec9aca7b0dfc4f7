"""The critic study: does the shared critic split reward_only's seeds, and which loss puts the belief in the encoder?

    ./bazelw run //experiments/mess3:critic_study -- --smoke              # every member at its smoke budget
    ./bazelw run //experiments/mess3:critic_study                         # the answer (README.md)
    ./bazelw run //experiments/mess3:critic_study -- --resume <study-id>  # after a stop: finished runs stay

Three agents at one commit, each its ordinary recipe run with `--seed <seed>` at reward_only's
budget (2^20 env steps): reward_only (one encoder shared by the policy and value heads: again, so
that the comparison is paired), reward_only_separate_critic (the value head reads a Transformer of
its own: the policy's encoder sees only the policy loss) and ppg (one network: the value loss
detached from the encoder in policy phases, auxiliary value phases through it; its coefficients
from ppg_tuning, on other seeds).

Scores: belief_study's control scores, and the held-out R^2 of the belief in block 1 of the
encoder each role reads, trained and random networks of the same architecture
(belief_geometry.headline): `policy_encoder`, what the policy head reads, and `critic_encoder`,
what the value head reads (the separate critic's own Transformer; the shared encoder in reward_only
and ppg). Pairs: each decoupled agent minus reward_only, seed by seed.
"""

from experiments.mess3.task import stages
from rl.harness.study import Study

STUDY = Study(
    agents={
        "reward_only": "experiments.mess3.reward_only",
        "separate_critic": "experiments.mess3.reward_only_separate_critic",
        "ppg": "experiments.mess3.ppg",
    },
    seeds=tuple(range(10)),
    scores=(
        stages.CONTROL_SCORES
        + stages.block_1_probe_scores("policy_encoder")
        + stages.block_1_probe_scores("critic_encoder")
    ),
    pairs=(("separate_critic", "reward_only"), ("ppg", "reward_only")),
)
