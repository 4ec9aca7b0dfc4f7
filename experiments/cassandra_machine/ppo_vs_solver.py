"""How close does PPO get to the reference solver on Cassandra's machine-maintenance POMDP?

    ./bazelw run //experiments/cassandra_machine:ppo_vs_solver -- --smoke

Two agents (task/agents.py) train one after the other (rl.harness.training.agents.train_in_turn) with PPO at
the file's discount 0.999: an MLP on the exact belief, and a transformer on the raw symbols and its
previous action. Each final policy is valued greedily from the start state (discounted return, tail
valued by the solver) and compared with the reference values of rl.envs.solvers: the point-based
solver's controller (a lower bound on the optimum, 595.76 at seed 0), the fully observable MDP
optimum (an upper bound, 661.86) and QMDP.

Records: one metrics stream per agent (rows carry `agent`), checkpoints under
artifacts/<run-id>/checkpoints/<agent>/ (recorded in the manifest with the agent as `trial_id`), and
results/<run-id>/solver_comparison.json.
"""

import pathlib

from experiments.cassandra_machine.task import agents
from rl.analysis.checkpoints import load_rl_module
from rl.envs.cassandra_machine import machine_pomdp
from rl.envs.solvers import qmdp, solve_fully_observable, solve_point_based
from rl.harness import StopRule, train_in_turn
from rl.harness.run import metric_keys, records

BUDGET = {True: StopRule(training_iterations=1), False: StopRule(env_steps=400_000)}
EVALUATION = {True: {"episodes": 4, "horizon": 200}, False: {"episodes": 64, "horizon": 3000}}
COMPARISON_FILE = "solver_comparison.json"


def reference_values(seed: int) -> tuple:
    pomdp = machine_pomdp()
    solution = solve_point_based(pomdp, seed=seed)
    return solution, {
        "point_based_start_value": solution.start_value,
        "point_based_seed": seed,
        "mdp_upper_bound": solve_fully_observable(pomdp).value(pomdp.start),
        "qmdp_value_estimate": qmdp(pomdp).value(pomdp.start),
    }


def run(context):
    solution, references = reference_values(seed=0)
    configs = {name: agents.ppo_config(agent, smoke=context.smoke) for name, agent in agents.AGENTS.items()}
    results = {}
    for trained in train_in_turn(context, configs, stop=BUDGET[context.smoke]):
        agent = agents.AGENTS[trained.name]
        module = load_rl_module(trained.checkpoint)
        value = agents.discounted_value(
            module, agent, solution, seed=context.seeds.integer(f"eval/{agent.name}"), **EVALUATION[context.smoke]
        )
        row = trained.row
        results[agent.name] = {
            "env_steps": row[metric_keys.ENV_STEPS],
            "iterations": row[metric_keys.ITERATION],
            "undiscounted_return_mean_last": row.get(metric_keys.RETURN),
            "discounted_value": value,
            "fraction_of_solver": value["mean"] / references["point_based_start_value"],
        }
        print(
            f"{agent.name}: discounted value {value['mean']:.1f} +- {value['standard_error']:.1f} "
            f"(solver {references['point_based_start_value']:.2f}, MDP bound {references['mdp_upper_bound']:.2f})"
        )
    comparison = {"references": references, "agents": results, "smoke": context.smoke}
    records.write_json_atomically(str(pathlib.Path(context.results_dir) / COMPARISON_FILE), comparison)
    print(f"results: {context.results_dir}")
    return comparison
