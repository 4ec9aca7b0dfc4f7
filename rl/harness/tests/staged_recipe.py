"""A recipe with stages after training, as the Mess3 recipes have, without RLlib (tests/resume_stages_test.py).

Training counts ITERATIONS iterations (checkpoints at 0, every even iteration and the last), continuing from
`context.resume` and saving nothing when nothing is left to train; then scoring, probing and plotting each read
the run's checkpoints and metrics rows (as rl.analysis.checkpoints.from_context and RunContext.metrics do) and
write `<stage>.json`: the iterations of the checkpoints and rows it saw. Each step prints `stage <name>` first.

STAGED_RECIPE_WAIT_IN=<training|scoring|probing|plotting>: that stage waits there until a stop is requested
(a signal, or SIGKILL ends the process), polling as probing does; a stage after training then raises
`StageStopped` (the run ends interrupted), training saves its last iteration and the later stages are skipped.
"""

import json
import os
import time

from rl.harness.run.context import check_left_to_do
from rl.harness.run.rows import RowBudget

ITERATIONS = 4
STAGES = ("scoring", "probing", "plotting")
STATE_FILE = "staged_state.json"
_WAIT_ENV = "STAGED_RECIPE_WAIT_IN"


class StageStopped(RuntimeError):
    """A stop request ended a stage after training (as ProbingStopped ends probing)."""


def _announce(context, stage: str) -> None:
    print(f"stage {stage}", flush=True)
    if os.environ.get(_WAIT_ENV) == stage:
        while not context.recorder.stop_requested:
            time.sleep(0.02)


def _save(context, iteration: int) -> None:
    with context.recorder.checkpoint(iteration=iteration, env_steps=100 * iteration) as folder:
        (folder / STATE_FILE).write_text(json.dumps({"iteration": iteration}))


def _train(context) -> int:
    iteration = 0
    if context.resume is not None:
        iteration = json.loads((context.resume.checkpoint / STATE_FILE).read_text())["iteration"]
    else:
        _save(context, 0)
    start = iteration
    while iteration < ITERATIONS and not context.recorder.stop_requested:
        iteration += 1
        context.recorder.log_metrics(
            {"training_iteration": iteration, "num_env_steps_sampled_lifetime": 100 * iteration}
        )
        if iteration % 2 == 0:
            _save(context, iteration)
        if iteration == 2:
            _announce(context, "training")
    if iteration != start and iteration % 2:
        _save(context, iteration)
    return iteration


def run(context):
    check_left_to_do(context, RowBudget.of(ITERATIONS, None))
    iteration = _train(context)
    if context.recorder.stop_signal is not None:
        print("stopped after training: the stages after it skipped", flush=True)
        return {"iterations": iteration}
    for stage in STAGES:
        _announce(context, stage)
        if context.recorder.stop_requested:
            raise StageStopped(f"{stage} stopped by {context.recorder.stop_signal}")
        checkpoints = context.checkpoints()
        if not checkpoints:
            raise LookupError(f"run {context.run_id} saved no checkpoint yet")
        context.write_output(
            f"{stage}.json",
            {
                "checkpoints": [entry.iteration for entry in checkpoints],
                "readable": [
                    json.loads((context.checkpoint_path(entry) / STATE_FILE).read_text())["iteration"]
                    for entry in checkpoints
                ],
                "rows": [row["training_iteration"] for row in context.metrics()],
            },
        )
    return {"iterations": iteration}
