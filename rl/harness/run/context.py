"""What a recipe's `run(context)` receives: operational facts only, frozen.

    def run(context: RunContext):
        budget = 2 if context.smoke else 200          # the recipe owns its budget and science
        config = PPOConfig().environment("CartPole-v1")
        return runners.run_direct(context, config, stop=runners.StopRule(training_iterations=budget))

A recipe with its own loop (no RLlib) uses the recorder directly:

    for step in range(start, budget):
        if context.recorder.stop_requested:           # SIGINT / SIGTERM arrived
            break
        context.recorder.log_metrics({"training_iteration": step, "fake/loss": loss})
    with context.recorder.checkpoint(iteration=step, env_steps=0) as folder:
        save_my_state(folder)                         # moved into place atomically afterwards
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping
from typing import Any, ContextManager, Protocol

from rl.harness.errors import NothingToDo
from rl.harness.run import records, seeding
from rl.harness.run.machine import HardwareProfile
from rl.harness.run.manifest import CheckpointEntry, ResumeSource, RunManifest, RunnerRecord
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION
from rl.harness.run.session import RunSession


class Recorder(Protocol):
    """What a recipe uses of its run's record keeper, `context.recorder` (a `RunSession`, whose other
    methods are the harness's runners': rolling checkpoints, the budget cap, Ray's cluster record).

        context.recorder.log_metrics({"training_iteration": 3, "fake/loss": 0.2})   # a metrics row (and its events)
        context.recorder.summarize("fake/loss")            # the keys summary.json carries, last and best
        with context.recorder.checkpoint(iteration=3, env_steps=0) as folder: ...  # a science checkpoint
        context.recorder.stop_requested, context.recorder.stop_signal   # SIGINT/SIGTERM or the cap; which
        context.recorder.record_runner(OwnLoopRunnerRecord("sequential", {...}))  # the manifest's runner section
        context.recorder.manifest.checkpoints              # the run's manifest as recorded so far
    """

    @property
    def manifest(self) -> RunManifest: ...

    @property
    def stop_requested(self) -> bool: ...

    @property
    def stop_signal(self) -> str | None: ...

    def log_metrics(self, row: dict, *, trial: str | None = None) -> dict: ...

    def summarize(self, *keys: str) -> None: ...

    def checkpoint(
        self, *, iteration: int, env_steps: int | None, trial: str | None = None, **kwargs: Any
    ) -> ContextManager[pathlib.Path]: ...

    def record_runner(self, runner: RunnerRecord) -> None: ...


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What one run's recipe is given: who it is (id, recipe, seed, smoke), where its records go, on what
    hardware, what it resumes, and its record keeper; frozen and operational (no science).

        context.seeds.integer("rllib")                      # named seed streams of the root seed
        context.hyperparameters["ppo/lr"]                   # a declared hyperparameter, --set or default
        context.write_output("probe_report.json", report)   # listed in the manifest's outputs
        for entry in context.checkpoints(): context.checkpoint_path(entry)
    """

    run_id: str
    recipe: str  # the recipe's dotted module
    seed: int  # the root seed, recorded unchanged; consumers draw from `seeds`
    smoke: bool  # run the recipe's minimal budget
    results_dir: pathlib.Path  # results/[smoke/]<run-id>/: small, committed
    artifacts_dir: pathlib.Path  # artifacts/[smoke/]<run-id>/: metrics.jsonl, checkpoints, Tune storage
    hardware: HardwareProfile
    resume: ResumeSource | None = None
    ray_address: str | None = None  # attach to this Ray cluster instead of starting one
    # The recipe's HYPERPARAMETERS with the --set overrides applied (run/hyperparameters.py).
    hyperparameters: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seeds: seeding.SeedStreams = dataclasses.field(default=None, compare=False, repr=False)
    # The run's record keeper: metrics, checkpoints, stop requests, and what the runners record.
    session: RunSession = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def recorder(self) -> Recorder:
        """The run's record keeper as a recipe sees it (`Recorder`); the harness's runners use `session`."""
        return self.session

    def checkpoints(self, trial: str | None = None) -> tuple[CheckpointEntry, ...]:
        """The checkpoints this run saved so far (of one line: an agent, a Tune trial); paths relative to artifacts_dir."""
        return self.session.manifest.checkpoints_of(trial)

    def checkpoint_path(self, entry: CheckpointEntry) -> pathlib.Path:
        return self.artifacts_dir / entry.path

    def metrics(self) -> list[dict]:
        """Every metrics row of this run so far, after the rows of the runs it continues up to its checkpoint
        (`records.read_run_rows`), read once per call."""
        return records.read_run_rows(self.artifacts_dir)

    def write_output(self, name: str, data: Any, *, place: str | None = None) -> pathlib.Path:
        """Writes an output of this run (a report, a figure) atomically, listed in the manifest (RunSession.write_output):
        by default a figure with the artifacts, the rest with the results (`records.output_place`)."""
        return self.session.write_output(name, data, place=place)


def check_left_to_do(context: RunContext, stop) -> None:
    """NothingToDo when the run resumes a completed run whose checkpoint already reached `stop` (anything with
    `reached(row)`, e.g. a `StopRule`): before anything starts. A resumed run that was interrupted or crashed after
    training goes on, training nothing, to the stages after training (from the checkpoints it carried over).

        check_left_to_do(context, StopRule(env_steps=budget))   # a runner's, or an own loop's, first step
    """
    resume = context.resume
    if resume is None or not resume.parent_completed:
        return
    counters = {ITERATION: resume.iteration or 0, ENV_STEPS: resume.env_steps or 0}
    if stop.reached(counters):
        raise NothingToDo(
            f"run {resume.parent_run_id} completed its budget (iteration {counters[ITERATION]}, env"
            f" steps {counters[ENV_STEPS]}): nothing to resume; raise the recipe's budget to train it"
            " further"
        )
