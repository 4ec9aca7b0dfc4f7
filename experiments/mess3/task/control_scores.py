"""How well a controlled-Mess3 agent acts, against the exact references of its task.

    from experiments.mess3.task import control_scores

    scores = control_scores.score_run(context, context.metrics())   # after training: control_scores.json + a figure

The references are `rl.envs.solvers.control_references` on this task's env (64 steps, PPO's
gamma 0.9): at the defaults the best memoryless policy (last token and previous action) is
passive, and the belief-optimal policy earns 3.510 vs 3.329 in gamma-0.9 value from the start
and 30.59 vs 21.33 per episode (rl/envs/README.md). Scores are normalised between the best
memoryless policy (0) and the belief-optimal one (1), on two measures:
- `value`: the gamma-0.9 discounted return from the start, what the references are optimal for
  and, for an agent on the belief, PPO's optimum too (README.md, "The oracle rung"); the
  headline ("beats the best memoryless value"). Per episode its
  standard deviation is about 2.9 against a gap of 0.18, so it takes thousands of episodes.
- `episode_return`: the undiscounted 64-step return, the quantity of the learning curves.
  Read it with care: a policy optimal for gamma 1 earns more per episode (35.9) than the
  gamma-0.9 belief-optimal one, and a memoryless policy can score 35.3, i.e. above 1 here.
The final policy is evaluated from its last checkpoint in fresh episodes, with its actions
sampled (as in training) and greedy. Each step counts the mean reward given the history, the exact
belief times `expected_rewards[action]`, instead of the sampled reward: the same expectation, and
on a trained agent the value's standard error falls from 0.045 to 0.027 at 4096 episodes.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from experiments.mess3.task import controlled_mess3 as task
from rl.analysis import ScoreScale, discounted_returns, mean_interval, mean_interval_or_point, normalised_interval
from rl.analysis.checkpoints import find_checkpoints, from_context, load_rl_module
from rl.analysis.plots import figure_png, learning_curves_figure
from rl.analysis.rollouts import collect_rollouts
from rl.envs.solvers import control_references
from rl.harness.run import metric_keys

SCORES_FILE = "control_scores.json"
FIGURE_FILE = "learning_curve_scores.png"
GAMMA = 0.9  # controlled_mess3.ppo_config's discount
HORIZON = task.ENV_KWARGS["episode_length"]
EVALUATION_EPISODES = {True: 256, False: 8192}  # per action mode; 8192: the value to about +-0.04 (95 %)
FINAL_ROWS = 10  # the training return at the end: mean of the last this many iterations


@functools.lru_cache(maxsize=2)
def references(gamma: float = GAMMA):
    """control_references on this task's env (about 2 s, once per process and gamma)."""
    return control_references(task.make_env().task, horizon=HORIZON, gamma=gamma)


def scales() -> dict[str, ScoreScale]:
    found = references()
    return {
        measure: ScoreScale(
            zero=getattr(found.memoryless, measure),
            one=getattr(found.belief_optimal, measure),
            zero_name="best memoryless",
            one_name="belief-optimal",
        )
        for measure in ("value", "episode_return")
    }


def return_optimal_scale() -> ScoreScale:
    """The episode return between the best memoryless and belief-optimal policies *for the return*
    (gamma 1): 35.26 and 35.91 at the defaults, where memory is worth 0.65 per episode."""
    found = references(1.0)
    return ScoreScale(
        zero=found.memoryless.episode_return,
        one=found.belief_optimal.episode_return,
        zero_name="best memoryless (gamma 1)",
        one_name="belief-optimal (gamma 1)",
    )


def references_record() -> dict:
    found = references()
    return {
        "gamma": GAMMA,
        "horizon": HORIZON,
        "env": task.ENV_KWARGS,
        "policies": {
            name: {
                "value": getattr(found, name).value,
                "episode_return": getattr(found, name).episode_return,
                "seconds": getattr(found, name).seconds,
            }
            for name in ("fully_observed", "belief_optimal", "memoryless", "open_loop", "passive")
        },
        "belief_optimal_upper_bound": found.belief_optimal.upper_bound,
        "memoryless_exhaustive": bool(found.memoryless_exhaustive),
        "memory_gap_ratio": {
            "value": found.memory_gap_ratio("value"),
            "episode_return": found.memory_gap_ratio("episode_return"),
        },
    }


def training_curve(rows: list[dict], scale: ScoreScale) -> dict:
    """The return per iteration, raw and normalised, and its mean over the last FINAL_ROWS iterations.

    Rows in which no episode ended (a run capped by --stop-at-iteration 1 before the first end) have no
    return: with none at all, the curve is empty, the final return None and `unavailable` says why.
    """
    points = [
        (row[metric_keys.ENV_STEPS], row[metric_keys.RETURN])
        for row in rows
        if isinstance(row.get(metric_keys.RETURN), (int, float))
    ]
    curve = {
        "env_steps": [steps for steps, _ in points],
        "return": [value for _, value in points],
        "normalised_return": [scale.normalise(value) for _, value in points],
    }
    if not points:
        return {
            **curve,
            "final_return": None,
            "final_normalised_return": None,
            "unavailable": f"no training return: no episode ended in the {len(rows)} training row(s)"
            f" ({metric_keys.RETURN} in none)",
        }
    # one row (a smoke run's episodes end once): a point, not an interval
    final = mean_interval_or_point([value for _, value in points[-FINAL_ROWS:]])
    return {**curve, "final_return": final, "final_normalised_return": normalised_interval(final, scale)}


def evaluate(
    module,
    *,
    num_episodes: int,
    seed: np.random.SeedSequence,
    stochastic: bool,
    env_config: dict | None = None,
    show_progress: bool = False,
) -> dict:
    """Fresh episodes of `module` in the env of `env_config` (the run's; None: the agents' observation):
    value and episode return with 95 % intervals, raw and normalised; `show_progress`: the rollouts' bar
    (count and ETA) on stderr."""
    played = collect_rollouts(
        module,
        task.ControlledEnv(env_config),
        num_episodes=num_episodes,
        max_steps=HORIZON,
        seed=seed,
        batch_size=256,
        policy="final",
        stochastic=stochastic,
        record_activations=False,
        show_progress=show_progress,
    )
    valid = played.valid()
    mean_rewards = expected_step_rewards(played.diagnostics["belief"], played.actions)
    measured = {
        "value": discounted_returns(mean_rewards, valid, gamma=GAMMA),
        "episode_return": discounted_returns(mean_rewards, valid, gamma=1.0),
    }
    result = {
        "episodes": num_episodes,
        "tilt_fraction": float((played.actions[valid] != 0).mean()),
        "memory_use": memory_use(
            played.observations[valid],
            played.actions[valid],
            played.diagnostics["belief"][valid][:, task.ENV_KWARGS["target_state"]],
        ),
    }
    for measure, scale in scales().items():
        interval = mean_interval(measured[measure])
        result[measure] = interval
        result[f"normalised_{measure}"] = normalised_interval(interval, scale)
    return result


def memory_use(observations: np.ndarray, actions: np.ndarray, target_belief: np.ndarray) -> dict:
    """How much the actions depend on more than the current observation (last token, previous action).

    - `history_dependent_fraction`: the share of steps whose action is not the most common action
      among steps with the same observation; 0 for every memoryless deterministic policy.
    - `belief_gap`: within observations where both happen, the mean belief in the target state
      when tilting minus when not, weighted by steps; > 0 when the agent tilts where it is surer.
    """
    keys = np.unique(observations, axis=0, return_inverse=True)[1].reshape(-1)
    tilts = actions != 0
    differing, gaps, weights = 0, [], []
    for key in np.unique(keys):
        members = keys == key
        counts = np.bincount(actions[members])
        differing += members.sum() - counts.max()
        if tilts[members].any() and not tilts[members].all():
            gaps.append(target_belief[members & tilts].mean() - target_belief[members & ~tilts].mean())
            weights.append(members.sum())
    return {
        "history_dependent_fraction": float(differing / len(actions)),
        "belief_gap": float(np.average(gaps, weights=weights)) if gaps else 0.0,
    }


def expected_step_rewards(beliefs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """(episodes, steps): the mean reward of each action given the exact belief it was taken in."""
    return (beliefs * references().expected_rewards[actions]).sum(axis=-1)


def final_policy(run_id: str, roots: list[str]):
    """(the run's records and checkpoints, the module of its last checkpoint, in eval mode)."""
    found = find_checkpoints(run_id, roots=roots)
    return found, load_rl_module(found.checkpoints[-1].path)


def score_run(context, rows: list[dict], env_config: dict) -> dict:
    """Scores of the run's last checkpoint and its training curve (`rows`: context.metrics(); `env_config`:
    the run's config's); writes SCORES_FILE and FIGURE_FILE with context.write_output, so the manifest lists them."""
    found = from_context(context)
    module = load_rl_module(found.checkpoints[-1].path)
    return_scale = scales()["episode_return"]
    seed = context.seeds.sequence("evaluation")  # the same episodes for every run of one root seed
    episodes = EVALUATION_EPISODES[context.smoke]
    scores = {
        "references": references_record(),
        "checkpoint": found.checkpoints[-1].name,
        "training": training_curve(rows, return_scale),
        "evaluation": {
            mode: _scored(
                found.checkpoints[-1].name,
                mode,
                episodes,
                lambda mode=mode: evaluate(
                    module,
                    num_episodes=episodes,
                    seed=seed,
                    stochastic=mode == "sampled",
                    env_config=env_config,
                    show_progress=True,
                ),
            )
            for mode in ("sampled", "greedy")
        },
    }
    context.write_output(SCORES_FILE, scores)
    if "unavailable" in scores["training"]:  # the evaluation above needs no episode of training's
        print(f"{scores['training']['unavailable']}: no final training return and no {FIGURE_FILE}", flush=True)
        return headline(scores)
    figure = learning_curves_figure(
        rows,
        x=metric_keys.ENV_STEPS,
        ys=[metric_keys.RETURN],
        title=context.run_id,
        scales={metric_keys.RETURN: return_scale},
    )
    context.write_output(FIGURE_FILE, figure_png(figure))
    return headline(scores)


def _scored(checkpoint: str, mode: str, episodes: int, evaluation) -> dict:
    """`evaluation()`, after the line that names the scoring stage (its rollouts' bar gives the count and ETA)."""
    print(f"scoring {checkpoint} ({mode} actions): {episodes} episodes", file=sys.stderr, flush=True)
    return evaluation()


def headline(scores: dict) -> dict:
    """The figures a summary shows: normalised value (sampled and greedy) and final training return."""
    evaluation = scores["evaluation"]
    return {
        "normalised_value": {mode: _rounded(evaluation[mode]["normalised_value"]) for mode in evaluation},
        "value": {mode: _rounded(evaluation[mode]["value"]) for mode in evaluation},
        "normalised_episode_return": {
            mode: _rounded(evaluation[mode]["normalised_episode_return"]) for mode in evaluation
        },
        "final_training_return": _rounded(scores["training"]["final_return"]),
        "final_training_normalised_return": _rounded(scores["training"]["final_normalised_return"]),
    }


def _rounded(interval: dict | None) -> dict | None:
    """The interval's mean and bounds to 4 places; None (a score that could not be computed) stays None."""
    return None if interval is None else {key: round(interval[key], 4) for key in ("mean", "low", "high")}
