"""A recipe without RLlib, for the fast tests: counts, logs metrics, checkpoints, obeys stop requests.

Test knobs (environment): FAKE_RECIPE_ITERATIONS (default 5; smoke: 2), FAKE_RECIPE_SLEEP_S
(pause per iteration, default 0), FAKE_RECIPE_FAIL_AT (raise at that iteration; with
FAKE_RECIPE_FAIL_SEED, only in the run of that root seed; FAKE_RECIPE_FAIL_AS: error (default), lost_actor,
silent_actor or lost_actor_explained: a Ray actor's death or timeout as Ray raises it, or under an algorithm's one
line),
FAKE_RECIPE_TRIAL (checkpoint under that trial, as a recipe training several agents does),
FAKE_RECIPE_TAIL_S (a stage after training that does not poll stop requests, as scoring a policy),
FAKE_RECIPE_OUTPUT_BYTES (after training, an output of that size, in FAKE_RECIPE_OUTPUT_PLACE: results
or artifacts, as a probe report or a figure), FAKE_RECIPE_PICKLE (state saved and loaded as a pickle,
as RLlib's learner state is: what a planted checkpoint would run), FAKE_RECIPE_ROLLING (checkpoints as a runner
saves them on a long budget: rolling ones on the session's cadence, a science one only at the end),
FAKE_RECIPE_CHECKPOINT_EVERY (otherwise a science checkpoint every that many iterations, default 2).
Declared hyperparameters (--set): fake/iterations (int >= 0; 0 = the knob above) and fake/loss_scale (float, any).
"""

import json
import os
import pickle
import time

from rl.harness.run.hyperparameters import Hyperparameters, Range

HYPERPARAMETERS = Hyperparameters(
    {"fake/iterations": 0, "fake/loss_scale": 1.0}, ranges={"fake/iterations": Range(0), "fake/loss_scale": Range()}
)

STEPS_PER_ITERATION = 100
STATE_FILE = "fake_state.json"


PICKLED_STATE_FILE = "fake_state.pkl"


def _save(context, iteration, env_steps, rolling=False):
    trial = os.environ.get("FAKE_RECIPE_TRIAL") or None
    state = {"iteration": iteration, "env_steps": env_steps}
    save = context.recorder.rolling_checkpoint if rolling else context.recorder.checkpoint
    with save(iteration=iteration, env_steps=env_steps, trial=trial) as folder:
        if os.environ.get("FAKE_RECIPE_PICKLE"):
            (folder / PICKLED_STATE_FILE).write_bytes(pickle.dumps(state))
            return
        with open(folder / STATE_FILE, "w") as handle:
            json.dump(state, handle)


def _load(checkpoint):
    if os.environ.get("FAKE_RECIPE_PICKLE"):
        return pickle.loads((checkpoint / PICKLED_STATE_FILE).read_bytes())
    with open(checkpoint / STATE_FILE) as handle:
        return json.load(handle)


def _fail(iteration: int, kind: str) -> None:
    """Raises the failure FAKE_RECIPE_FAIL_AS names: a plain error, or a Ray actor's death (as a lost EnvRunner's),
    raised as it is or from the one line an algorithm says of it."""
    if kind == "error":
        raise RuntimeError(f"fake failure at iteration {iteration}")
    from ray.exceptions import ActorDiedError, GetTimeoutError

    if kind == "lost_actor":
        raise ActorDiedError()
    if kind == "silent_actor":
        raise GetTimeoutError("no result from the actor within 1 s")
    if kind == "lost_actor_explained":
        raise RuntimeError("EnvRunners [1] died while sampling: continue the run (--resume-from)") from ActorDiedError()
    raise ValueError(f"FAKE_RECIPE_FAIL_AS: unknown failure {kind!r}")


def run(context):
    iterations = 2 if context.smoke else int(os.environ.get("FAKE_RECIPE_ITERATIONS", "5"))
    iterations = context.hyperparameters.get("fake/iterations") or iterations
    sleep_s = float(os.environ.get("FAKE_RECIPE_SLEEP_S", "0"))
    fail_at = int(os.environ.get("FAKE_RECIPE_FAIL_AT", "0"))
    if os.environ.get("FAKE_RECIPE_FAIL_SEED", str(context.seed)) != str(context.seed):
        fail_at = 0
    iteration, env_steps = 0, 0
    if context.resume is not None:
        state = _load(context.resume.checkpoint)
        iteration, env_steps = state["iteration"], state["env_steps"]
    noise = context.seeds.generator("fake/noise")
    context.recorder.summarize("fake/loss")
    saved, loss = None, None
    rolling = bool(os.environ.get("FAKE_RECIPE_ROLLING"))
    checkpoint_every = int(os.environ.get("FAKE_RECIPE_CHECKPOINT_EVERY", "2"))
    context.recorder.rolling_restart(iteration / max(iterations, 1))
    while iteration < iterations and not context.recorder.stop_requested:
        iteration += 1
        env_steps += STEPS_PER_ITERATION
        if iteration == fail_at:
            _fail(iteration, os.environ.get("FAKE_RECIPE_FAIL_AS", "error"))
        loss = context.hyperparameters.get("fake/loss_scale", 1.0) * (
            1.0 / iteration + 0.01 * float(noise.standard_normal())
        )
        context.recorder.log_metrics(
            {
                "training_iteration": iteration,
                "num_env_steps_sampled_lifetime": env_steps,
                "fake": {"loss": loss},
            }
        )
        if rolling and iteration < iterations and context.recorder.rolling_due(iteration / iterations):
            started = time.perf_counter()
            _save(context, iteration, env_steps, rolling=True)
            context.recorder.rolling_restart(iteration / iterations, save_s=time.perf_counter() - started)
        elif not rolling and iteration % checkpoint_every == 0:
            _save(context, iteration, env_steps)
            saved = iteration
        time.sleep(sleep_s)
    if saved != iteration:
        _save(context, iteration, env_steps)
    time.sleep(float(os.environ.get("FAKE_RECIPE_TAIL_S", "0")))
    if output_bytes := int(os.environ.get("FAKE_RECIPE_OUTPUT_BYTES", "0")):
        context.write_output(
            "report.bin", bytes(output_bytes), place=os.environ.get("FAKE_RECIPE_OUTPUT_PLACE", "results")
        )
    return {
        "iterations": iteration,
        "env_steps": env_steps,
        "last_loss": loss,
        "niceness": os.getpriority(os.PRIO_PROCESS, 0),
    }  # the study tests: a member keeps the user's priority
