"""Does a transformer trained by PPO on reward alone represent the belief over Mess3's hidden states?

    ./bazelw run //experiments/mess3:reward_only -- --smoke    # every stage, minutes
    ./bazelw run //experiments/mess3:reward_only               # the full budget

Stages: train a TransformerModel agent with PPO on controlled Mess3 (controlled_mess3.py), saving
the untrained network (step 0) and log-spaced checkpoints; then probe the residual stream of
every checkpoint, and of randomly initialised networks of the same architecture, with affine
probes of the exact belief (belief_geometry.py). Results: results/[smoke/]<run-id>/.
"""

from experiments.mess3 import belief_geometry
from experiments.mess3 import controlled_mess3 as task
from rl.harness import runners

SMOKE_ENV_STEPS = 3 * 1024  # three updates: checkpoints at 0, 1, 2, 3
FULL_ENV_STEPS = 2**20  # 512 updates of 2048: ~6 min of training, ~11 min in all on 2 cores (README.md)
RANDOM_NETWORKS = {True: 1, False: 3}


def train(context, *, env_steps: int) -> dict:
    """The training stage (bench_throughput times it as is): PPO with step-0 and log-spaced checkpoints."""
    return runners.run_direct(context, task.ppo_config(smoke=context.smoke), stop=runners.StopRule(env_steps=env_steps),
                              checkpoint_at=runners.LogSpaced(2.0), checkpoint_initial=True,
                              parallel_envs=task.PARALLEL_ENVS)


def run(context):
    outcome = train(context, env_steps=SMOKE_ENV_STEPS if context.smoke else FULL_ENV_STEPS)
    seeds = context.seeds.integers("random_networks", RANDOM_NETWORKS[context.smoke])
    comparison = belief_geometry.analyse(context, task.probe_plan_for(smoke=context.smoke),
                                         random_networks=[task.build_random_network(seed) for seed in seeds])
    print(f"results: {context.results_dir}")
    return {**outcome, "random_network_seeds": seeds, "probe_r2": belief_geometry.headline(comparison)}


def probe_plan():
    """For `bazel run //rl/analysis:probe -- <run-id>`: the full plan."""
    return task.probe_plan_for(smoke=False)
