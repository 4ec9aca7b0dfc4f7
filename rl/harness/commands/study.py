"""`rl-harness study <module>`: a study's agents x seeds as parallel Tune trials, recorded, resumable, summarised.

    rl-harness study experiments.mess3.belief_study [--smoke] [--max-concurrent N] [--ray-address ADDRESS]
    rl-harness study experiments.mess3.belief_study --resume <study-id>      # continue: finished runs stay
    rl-harness study experiments.mess3.belief_study --resume <study-id> --seeds 5-14   # more seeds, the study's commit
    rl-harness study experiments.mess3.belief_study --runs reward_only=<id>,<id> memoryless=<id>,<id>
    rl-harness study experiments.mess3.belief_study --study-id s1 --share 1/3   # members 1, 4, 7, ... (one machine's)

Each member is an ordinary run (`rl-harness <agent recipe> --seed S --run-id <study>-<agent>-s<S>`)
with its own manifest under the same results/ and artifacts/; the study's record and summary are
in results/[smoke/]studies/<study-id>/. With a store (docs/scale_out.md) the study's folders and every member
run are mirrored to it, the study reads its members from it, and `--resume` on another machine starts from
it alone (commands/study_transfer.py). `--resume` runs only what is not completed: a pending
member from scratch, an interrupted one from its last checkpoint (`--resume-from` its run), a
failed one again only with `--retry-failed`; from a checkout whose code or lock is not the study's, the
study's commit, built in a scratch worktree, resumes it (`study_commit.py`). `--runs` summarises runs
made elsewhere (no training). `--share INDEX/COUNT` runs one fixed share of the study's members under a record
of its own (study/shares.py), started or continued by the same command line; `--resume <study-id>` gathers
the shares from the store into the whole study and continues it (what a rented instance of
rl/devops/vast does: docs/vast.md, "A study on rented machines").
A summary refuses, in one line naming the runs, a set that mixes smoke and full runs, repeats a
seed, or differs in commit, lock or settings (summary.check_comparable).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import signal
import sys
import tempfile
import threading
import time

from absl import logging

from rl.harness import env_vars
from rl.harness.commands import execution, recipes, study_commit, study_transfer
from rl.harness.errors import EXIT_FAILED, UsageError
from rl.harness.run import begin, buildinfo, finder, hyperparameters, provenance, redaction
from rl.harness.run.layout import RunLayout
from rl.harness.run.manifest import read_manifest
from rl.harness.run.status import new_run_id, run_id_problem, this_process
from rl.harness.study import hparams, plan, shares, statistics, summary
from rl.harness.study.declaration import Study
from rl.harness.study.record import (
    COMPLETED,
    CRASHED,
    FAILED,
    INTERRUPTED,
    PENDING,
    REFUSED,
    RUNNING,
    MemberRecord,
    StudyRecord,
    find_study,
    study_folder,
)
from rl.harness.training import hardware

_RUN_COMMAND = ("-m", "rl.harness.commands.cli")
_EVENT_WORDS = {RUNNING: "started", COMPLETED: "finished"}  # other statuses name themselves (failed, interrupted)
_ON_NODES = (
    f" (on a cluster node started with ${env_vars.NODE_FOLDER_ENV}: below that folder's artifacts/, on the node)"
)
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # each member's run: the harness's own command line
# How many times a member (with a store) is continued on another node after its own was lost, in one study command.
_NODE_LOSSES = 2


def add_arguments(parser: argparse.ArgumentParser, user_path, positive) -> None:
    parser.add_argument("module", help="dotted module defining STUDY = rl.harness.study.Study(...)")
    parser.add_argument("--smoke", action="store_true", help="every member at its recipe's smoke budget")
    parser.add_argument(
        "--stop-at-env-steps",
        type=positive,
        metavar="N",
        help="cap every member's run at N env steps (a shorter study; recorded, kept on --resume)",
    )
    parser.add_argument("--study-id", help="name of a new study (default: UTC timestamp + random suffix)")
    parser.add_argument("--resume", metavar="STUDY_ID", help="continue this study: run only what is not completed")
    parser.add_argument("--retry-failed", action="store_true", help="with --resume: run failed members again")
    parser.add_argument(
        "--seeds",
        type=parse_seeds,
        metavar="SEEDS",
        help="with --resume: add these seeds to the study (10-42, or 10,12,15), every agent at each",
    )
    parser.add_argument(
        "--share",
        metavar="INDEX/COUNT",
        help="with --study-id: run (or continue) only members i with i mod COUNT = INDEX, recorded as that share",
    )
    parser.add_argument("--runs", nargs="+", metavar="AGENT=ID,ID", help="summarise these runs as the study's members")
    parser.add_argument("--max-concurrent", type=int, help="trials at once (default: as many as the CPUs allow)")
    parser.add_argument("--cpus-per-trial", type=int, default=1, help="CPUs each member's run may use (default 1)")
    parser.add_argument("--ray-address", help="run the trials on this Ray cluster (docs/cluster.md)")
    parser.add_argument(
        "--upload-artifacts",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="mirror the study and its members to the store, and read the members from it (default:"
        " when one is configured and not --smoke); see docs/scale_out.md",
    )
    parser.add_argument("--results-dir", type=user_path, help="results root (default: results/ beside the module)")
    parser.add_argument("--artifacts-dir", type=user_path, help="artifacts root (default: artifacts/ beside it)")


def parse_seeds(text: str) -> tuple[int, ...]:
    """`10-42` (both ends included) or `10,12,15`, in that order; argparse's error naming the form otherwise."""
    try:
        if "-" in text:
            first, last = (int(part) for part in text.split("-"))
            seeds = tuple(range(first, last + 1))
        else:
            seeds = tuple(int(part) for part in text.split(","))
    except ValueError:
        seeds = ()
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(
            f"expected FIRST-LAST or SEED,SEED,... of distinct non-negative integers, e.g. 10-42, got {text!r}"
        )
    return seeds


def add_plan_arguments(parser: argparse.ArgumentParser, user_path, positive_number) -> None:
    parser.add_argument("study_id", help="the study whose seeds so far the plan starts from")
    parser.add_argument("--width", type=positive_number, required=True, help="the 95 %% interval's width wanted")
    parser.add_argument(
        "--statistic",
        choices=list(statistics.STATISTICS),
        help="the statistic whose interval it is (default: the one the study declares)",
    )
    parser.add_argument(
        "--score",
        action="append",
        dest="scores",
        metavar="NAME",
        help="plan for this score only (repeatable; default: every score of the study)",
    )
    parser.add_argument("--results-dir", type=user_path, required=True, help="the results root the study is under")


def plan_seeds(options: argparse.Namespace) -> str:
    """`study plan`: the plan's tables (study/plan.py); UsageError naming the fix for an unknown study or score."""
    results_root = recipes.check_folder(options.results_dir, "--results-dir")
    folder = find_study(results_root, options.study_id)
    if folder is None:
        raise UsageError(f"no study {options.study_id!r} under {results_root}; pass the --results-dir it was run with")
    record = StudyRecord.read(folder)
    declared = Study.from_description(record.grid)
    unknown = sorted(set(options.scores or ()) - {score.name for score in declared.scores})
    if unknown:
        raise UsageError(
            f"study {record.study_id} has no score {', '.join(map(repr, unknown))}; its scores:"
            f" {', '.join(repr(score.name) for score in declared.scores)}"
        )
    results = [summary.load_member(results_root, member) for member in record.members]
    found = plan.plan(
        declared, results, width=options.width, statistic=options.statistic or declared.statistic, scores=options.scores
    )
    return plan.markdown(record.study_id, found)


def load_study(module_name: str) -> Study:
    """`module_name`'s STUDY; UsageError naming the fix when it is missing."""
    study = getattr(recipes.load_module(module_name), "STUDY", None)
    if not isinstance(study, Study):
        raise UsageError(f"{module_name} defines no STUDY = rl.harness.study.Study(...); see docs/harness.md, Studies")
    return study


def _provenance(module_name: str) -> tuple[dict, dict]:
    build = buildinfo.current().as_dict()
    return begin.code_state(recipes.load_module(module_name).__file__, build), build


def _code_key(code: dict) -> tuple:
    return tuple(
        (name, (code.get(name) or {}).get("commit"), (code.get(name) or {}).get("diff_sha256"))
        for name in ("library", "experiment_repo")
    )


def _difference(record: StudyRecord, code: dict, build: dict) -> str | None:
    """What of `record`'s code and lock this build does not have, in words; None when it has both."""
    if _code_key(record.code) != _code_key(code):
        return f"code ({summary.describe_code(record.code)}, here {summary.describe_code(code)})"
    if record.build.get("lock_sha256") != build.get("lock_sha256"):
        return f"lock ({record.build.get('lock_sha256')}, here {build.get('lock_sha256')})"
    return None


class StudyCommand:
    """One invocation: validated in `__init__` (nothing written), then `run()` (trials, record, summary)."""

    def __init__(self, options: argparse.Namespace):
        self.options = options
        if options.max_concurrent is not None and options.max_concurrent < 1:
            raise UsageError(f"--max-concurrent must be at least 1, got {options.max_concurrent}")
        if options.cpus_per_trial < 1:
            raise UsageError(f"--cpus-per-trial must be at least 1, got {options.cpus_per_trial}")
        if options.retry_failed and not options.resume:
            raise UsageError("--retry-failed goes with --resume <study-id>")
        if options.seeds and not options.resume:
            raise UsageError("--seeds adds seeds to a study: it goes with --resume <study-id>")
        if options.runs and options.resume:
            raise UsageError("--runs makes a new study from finished runs; it does not go with --resume")
        if options.share and (options.resume or options.runs):
            raise UsageError("--share starts or continues a share of a study: it goes with --study-id only")
        if options.ray_address is None:  # a cluster may grow (an autoscaler); this machine does not
            _check_fits_this_machine(options.cpus_per_trial, options.max_concurrent)
        self.study = load_study(options.module)
        if reason := provenance.no_commit_reason(os.path.realpath(recipes.load_module(options.module).__file__)):
            raise UsageError(
                f"{options.module} is not in a git checkout with a commit ({reason}): a study compares its"
                " members by commit; commit the study and its recipes first (git init, git add, git commit)"
            )
        self.results_root, self.artifacts_root = recipes.run_roots(
            options.results_dir, options.artifacts_dir, options.module
        )
        recipes.check_writable(self.results_root, "--results-dir")
        recipes.check_writable(self.artifacts_root, "--artifacts-dir")
        self.code, self.build = _provenance(options.module)
        self.stop_signal: str | None = None
        self.store = None if options.runs else study_transfer.study_store(options)  # --runs trains nothing
        self._view_folder = tempfile.TemporaryDirectory(prefix="rl-harness-study-view-") if self.store else None
        self.view = study_transfer.MemberView(self.store, pathlib.Path(self._view_folder.name)) if self.store else None
        self._view_due, self._view_failing = 0.0, False
        self.at_commit: str | None = None  # the study's commit, when this checkout's code or lock is not its
        share = shares.Share.parse(options.study_id, options.share) if options.share else None
        resume = options.resume or (share.record_id if share and self._recorded(share.record_id) else None)
        # The same share command line started again: on a launch's replacement machine, rented once the machine
        # that ran the share was destroyed, so a member still reading `running` there (its heartbeat not yet stale)
        # was cut off with it, and continues from its newest checkpoint.
        self._continuing_share = share is not None and resume is not None
        if resume:
            self.record = self._resumable(resume)
            if self.at_commit:
                return
        else:
            study_id = share.record_id if share else (options.study_id or new_run_id())
            if problem := run_id_problem(study_id):
                raise UsageError(problem.replace("run id", "study id"))
            self.record = StudyRecord.new(
                study_id,
                module=options.module,
                study=self.study,
                smoke=options.smoke,
                code=self.code,
                build=self.build,
                command_line=sys.argv,
                stop_at_env_steps=options.stop_at_env_steps,
            )
            if share is not None:
                mine = share.members(self.study.members())
                self.record = self.record.replace(
                    members=tuple(member for member in self.record.members if member.member in mine),
                    share=dataclasses.asdict(share),
                )
            if self.folder.exists():
                raise UsageError(
                    f"study {study_id} already exists at {self.folder}; resume it with --resume {study_id}"
                    " or choose another --study-id"
                )
            if self.store is not None:
                study_transfer.check_free(self.store, options.module, study_id, options.smoke)
        for name, agent in self.study.agents.items():  # a typo in a recipe or a setting fails before any record
            declared = getattr(recipes.load_recipe(agent), "HYPERPARAMETERS", None) or hyperparameters.Hyperparameters(
                {}
            )
            for setting in self.study.settings() if self.study.hyperparameters else ():
                try:
                    declared.parse(hyperparameters.set_arguments(dict(setting))[1::2])
                except UsageError as error:
                    raise UsageError(
                        f"the study's hyperparameters do not fit agent {name} ({agent}): {error}"
                    ) from None

    @property
    def folder(self) -> pathlib.Path:
        return study_folder(self.results_root, self.record.study_id, self.record.smoke)

    def _recorded(self, study_id: str) -> bool:
        """Whether study `study_id` has a record here or in the store."""
        in_store = self.store is not None and study_transfer.find_study(self.store, study_id) is not None
        return find_study(self.results_root, study_id) is not None or in_store

    def _resumable(self, study_id: str) -> StudyRecord:
        if problem := run_id_problem(study_id):
            raise UsageError(problem.replace("run id", "study id"))
        folder = find_study(self.results_root, study_id)
        if folder is None and self.store is not None:
            folder = study_transfer.fetch_record(self.store, study_id, self.results_root, self.artifacts_root)
        if folder is None and self.store is not None:
            folder = study_transfer.gather_shares(self.store, study_id, self.results_root, self.artifacts_root)
        if folder is None:
            elsewhere = f" nor in {self.store.config.url}" if self.store else ""
            raise UsageError(
                f"no study {study_id!r} under {self.results_root}{elsewhere}; pass the --results-dir it was"
                " run with, or configure the store it was mirrored to (docs/scale_out.md; a smoke study:"
                " with --upload-artifacts)"
            )
        record = StudyRecord.read(folder)
        if record.module != self.options.module:
            raise UsageError(f"study {study_id} is a study of {record.module}, not {self.options.module}")
        if self.options.smoke != record.smoke:
            raise UsageError(
                f"study {study_id} was {'a smoke' if record.smoke else 'a full'} study; resume it"
                f" {'with' if record.smoke else 'without'} --smoke"
            )
        if self.options.stop_at_env_steps not in (None, record.stop_at_env_steps):
            raise UsageError(
                f"study {study_id} caps its members at {record.stop_at_env_steps or 'no'} env steps; resume"
                " it without --stop-at-env-steps (the record keeps its cap)"
            )
        if differs := _difference(record, self.code, self.build):
            self.at_commit = study_commit.recorded_commit(
                record, differs
            )  # its commit's build checks and runs the rest
            return record
        self._update_view(record.members, force=True)
        for member in record.members:
            result = self._look(member)[1]
            if result.status == RUNNING and not self._continuing_share:
                raise UsageError(
                    f"{member.member.name}: run {result.run_ids[-1]} is still running (pid"
                    f" {result.last.process.pid if result.last.process else '?'}); wait for it or stop it"
                )
        if record.effective_status == CRASHED:
            logging.warning(
                "study %s crashed (its command, pid %d, is gone); resuming it", study_id, record.process.pid
            )
        self.study = dataclasses.replace(self.study, seeds=tuple(record.grid["seeds"]))  # more, once extended
        if self.options.seeds:
            record = self._with_seeds(record, self.options.seeds)
        return record.replace(
            command_lines=(*record.command_lines, redaction.redact_all(sys.argv)),
            status=RUNNING,
            process=this_process(),
        )

    def _with_seeds(self, record: StudyRecord, seeds: tuple[int, ...]) -> StudyRecord:
        """`record` with the seeds it lacks added to its grid, and a pending member for each (agent, setting) at each,
        after the members it has: they run seed by seed, as a study's first seeds do."""
        added = tuple(seed for seed in seeds if seed not in self.study.seeds)
        new = dataclasses.replace(self.study, seeds=added).members() if added else ()
        self.study = dataclasses.replace(self.study, seeds=(*self.study.seeds, *added))
        print(
            f"study {record.study_id}: seeds {', '.join(map(str, added)) or 'none'} added ({len(new)} member(s));"
            f" {len(self.study.seeds)} seeds in all",
            flush=True,
        )
        return record.replace(
            grid={**record.grid, "seeds": list(self.study.seeds)},
            members=(*record.members, *(MemberRecord(m.agent, m.seed, setting=m.setting) for m in new)),
        )

    # -- running ------------------------------------------------------------------------------

    def run(self) -> int:
        if self.at_commit:
            return study_commit.resume(
                self.record,
                self.at_commit,
                self.options,
                self.code["experiment_repo"]["root"],
                self.results_root,
                self.artifacts_root,
            )
        if self.options.runs:
            return self._adopt(self.options.runs)
        trials = self._plan()
        self.record.write(self.folder)
        if self.store is None:
            return self._run(trials)
        with study_transfer.mirrored(
            self.store, self.record, self.results_root, self.artifacts_root, self.resume_command()
        ):
            return self._run(trials)

    def _run(self, trials: list) -> int:
        if (self.code.get("library") or {}).get("dirty") and trials:
            logging.warning(
                "the tree has uncommitted changes: editing it while the study runs makes its members differ"
                " in code, and the summary then refuses them; commit first for a study you keep"
            )
        done = sum(member.status == COMPLETED for member in self.record.members)
        print(
            f"study {self.record.study_id}: {len(trials)} run(s) to go, {done} completed; record {self.folder};"
            f" each member's output in {self._log('<run id>')}{_ON_NODES if self.store else ''}",
            flush=True,
        )
        errors = self._run_trials(trials) if trials else {}
        self._refresh(errors, final=True)
        if self.stop_signal is not None:
            self.record = self.record.replace(status=INTERRUPTED)
            self.record.write(self.folder)
            print(
                f"study {self.record.study_id} interrupted ({self.stop_signal}); continue it with"
                f" `{self.resume_command()}`",
                file=sys.stderr,
            )
            return 128 + int(getattr(signal, self.stop_signal))
        return self._share_done() if self.record.share else self._summarise()

    def resume_command(self) -> str:
        """The command that continues this study, as printed: run from the repository root, it finds the study."""
        folders = [
            (flag, getattr(self.options, option))
            for flag, option in (("--results-dir", "results_dir"), ("--artifacts-dir", "artifacts_dir"))
        ]
        return buildinfo.harness_command(
            "study",
            self.record.module,
            "--resume",
            self.record.study_id,
            *(["--smoke"] if self.record.smoke else []),
            *(word for flag, folder in folders if folder is not None for word in (flag, str(folder))),
        )

    @property
    def _members_id(self) -> str:
        """What the members' run ids start with: the study's id (the whole study's, for a share)."""
        share = shares.Share.of(self.record)
        return share.study_id if share else self.record.study_id

    def _plan(self) -> list:
        from rl.harness.training.member_trials import MemberTrial  # Ray only when trials run

        trials = []
        for planned in self.record.members:
            member, result = self._look(planned)
            status = CRASHED if result.status == RUNNING and self._continuing_share else result.status
            if status == COMPLETED or (status == FAILED and not self.options.retry_failed):
                continue
            resume_from = member.last_run if status in (INTERRUPTED, CRASHED) and result.last.checkpoints else None
            variant = f"-v{self.study.settings().index(member.setting)}" if self.study.hyperparameters else ""
            first = f"{self._members_id}-{member.agent}{variant}-s{member.seed}"
            attempt = len(member.runs) + 1
            run_id = f"{first}-a{attempt}" if member.runs else first
            while self._begun_unrecorded(run_id, member.agent):
                attempt += 1
                run_id = f"{first}-a{attempt}"
            if problem := run_id_problem(run_id):
                raise UsageError(f"{problem} (study id + agent name too long: choose a shorter --study-id)")
            argv = [
                sys.executable,
                *_RUN_COMMAND,
                self.study.agents[member.agent],
                "--seed",
                str(member.seed),
                "--run-id",
                run_id,
                *(["--smoke"] if self.record.smoke else []),
                "--upload-artifacts" if self.store else "--no-upload-artifacts",
                *(["--resume-from", resume_from] if resume_from else []),
                *(["--stop-at-env-steps", str(self.record.stop_at_env_steps)] if self.record.stop_at_env_steps else []),
                *hyperparameters.set_arguments(dict(member.setting)),
            ]
            if self.options.ray_address:
                argv += ["--ray-address", self.options.ray_address]
            trials.append(
                MemberTrial(
                    run_id=run_id,
                    argv=tuple(argv),
                    roots=(str(self.results_root), str(self.artifacts_root)),
                    log=str(self._log(run_id).relative_to(self.artifacts_root)),
                    node_folders=self.store is not None,
                )
            )
            self.record = self.record.with_member(dataclasses.replace(member, runs=(*member.runs, run_id)))
        return trials

    def _run_trials(self, trials) -> dict[str, str]:
        from rl.harness import env_vars
        from rl.harness.training import member_trials

        previous = {}

        def install_signals():
            for number in _STOP_SIGNALS:
                previous.setdefault(number, signal.signal(number, self._on_signal))

        install_signals()  # and again once Ray is up: ray.init replaces them
        lock = threading.Lock()

        def tick(attempts: dict[str, int]):
            with lock:
                self._note_attempts(trials, attempts)
                self._refresh({})

        try:
            cpus = hardware.usable_cpu_count()[0]
            environment = {
                "PYTHONPATH": ":".join(path for path in sys.path if path),
                env_vars.CPU_SHARE_ENV: str(self.options.cpus_per_trial),
            }
            return member_trials.run_trials(
                trials,
                ray_address=self.options.ray_address,
                num_cpus=cpus,
                cpus_per_trial=self.options.cpus_per_trial,
                max_concurrent=self.options.max_concurrent,
                env=environment,
                storage=study_folder(self.artifacts_root, self.record.study_id, self.record.smoke)
                / f"tune-{len(self.record.command_lines)}",
                stop_signal=lambda: self.stop_signal,
                on_tick=tick,
                on_ray_started=install_signals,
                retries=_NODE_LOSSES if self.store else 0,
            )
        finally:
            for number in _STOP_SIGNALS:
                signal.signal(number, previous[number])

    def _note_attempts(self, trials: list, attempts: dict[str, int]) -> None:
        """Names each further attempt's run (a trial tried again after its node was lost) as its member's latest."""
        for trial in trials:
            member = next(member for member in self.record.members if trial.run_id in member.runs)
            later = [trial.attempt_id(attempt) for attempt in range(2, attempts.get(trial.run_id, 1) + 1)]
            if missing := [run_id for run_id in later if run_id not in member.runs]:
                self.record = self.record.with_member(dataclasses.replace(member, runs=(*member.runs, *missing)))

    def _on_signal(self, number: int, frame) -> None:
        if self.stop_signal is None:
            self.stop_signal = signal.Signals(number).name
            logging.warning(
                "%s: asking every running member to stop (each checkpoints and records itself"
                " interrupted); no new member starts",
                self.stop_signal,
            )

    def _refresh(self, errors: dict[str, str], *, final: bool = False) -> None:
        """Statuses and spans from the members' own manifests; `final`: a planned run that never started is dropped."""
        changed = False
        # At the end every member is read again: a run's last records reach the store over several mirror passes.
        self._update_view(
            [member for member in self.record.members if final or member.status not in (COMPLETED, FAILED)], force=final
        )
        for member in self.record.members:
            started, result = self._look(member)
            updated = _as_recorded(
                dataclasses.replace(member, runs=started.runs if final else member.runs),
                result,
                errors.get(member.last_run) if member.last_run else None,
            )
            if updated != member:
                if updated.status != member.status and updated.status != PENDING:
                    if member.status == PENDING and updated.status != RUNNING:  # it ran between two looks
                        print(self._event(dataclasses.replace(updated, status=RUNNING)))
                    print(self._event(updated), flush=True)
                self.record = self.record.with_member(updated)
                changed = True
        if changed:
            self.record.write(self.folder)

    def _begun_unrecorded(self, run_id: str, agent: str) -> bool:
        """Whether run `run_id` began though the study did not see it start: its folder is here, or (a run killed
        before the store held its index) its prefix in the store holds files. Its id is not used again."""
        if self.store is None:
            return False
        layout = RunLayout(self.results_root, self.artifacts_root, run_id, self.record.smoke)
        return RunLayout.find(self.results_root, run_id) is not None or bool(
            self.store.list_keys(layout.remote_prefix(self.store.config.prefix, self.study.agents[agent]))
        )

    def _look(self, member: MemberRecord) -> tuple[MemberRecord, summary.MemberResult]:
        """`member` without a planned run that never started, and what its runs' manifests say: as the store holds
        them where the study has one (the view), else as this machine's results root does."""
        roots = (
            (self.view.results_root, self.view.artifacts_root)
            if self.view
            else (self.results_root, self.artifacts_root)
        )
        started = _started_runs(member, roots[0])
        return started, summary.load_member(roots[0], started, roots[1])

    def _update_view(self, members, *, force: bool) -> None:
        """Brings the view of `members`' runs up to date with the store: with `force`, now (UploadError when the store
        fails); else at most every mirror interval, a failing store costing one warning until it answers again."""
        if self.view is None or (not force and time.monotonic() < self._view_due):
            return
        self._view_due = time.monotonic() + env_vars.mirror_seconds()[0]
        run_ids = [run_id for member in members for run_id in member.runs]
        if force:
            self.view.update(run_ids)
            return
        problem = self.view.try_update(run_ids)
        if problem is not None and not self._view_failing:
            logging.warning(
                "the store failed (%s); the members' statuses shown are the last it gave, and the study"
                " reads them again at the next tick",
                problem,
            )
        self._view_failing = problem is not None

    @property
    def _hparams_folder(self) -> pathlib.Path:
        """Where the study's HParams events go: beside its member logs, in its artifacts folder."""
        return study_folder(self.artifacts_root, self.record.study_id, self.record.smoke) / hparams.EVENTS_DIR

    def _log(self, run_id: str) -> pathlib.Path:
        """Where a member's run writes its output: the study's artifacts folder, `logs/<run id>.log`."""
        return study_folder(self.artifacts_root, self.record.study_id, self.record.smoke) / "logs" / f"{run_id}.log"

    def _event(self, member: MemberRecord) -> str:
        """A member's new status as the terminal shows it, e.g. `study s1: started first/seed 0 (run s1-first-s0); log
        <path>`."""
        line = (
            f"study {self.record.study_id}: {_EVENT_WORDS.get(member.status, member.status)} {member.member.name}"
            f" (run {member.last_run})"
        )
        if member.status != COMPLETED:
            line += f"; log {self._log(member.last_run)}"
        return line + (f": {member.error}" if member.status == FAILED and member.error else "")

    # -- summary ------------------------------------------------------------------------------

    def _summarise(self, results: list | None = None) -> int:
        results = results or [self._look(member)[1] for member in self.record.members]
        try:
            summary.check_comparable(results)
        except summary.StudyRefused:
            self.record = self.record.replace(status=REFUSED)
            self.record.write(self.folder)
            raise
        try:
            found = summary.write_summary(self.folder, self.study, results)
        except OSError as failure:
            return self._summary_not_written(failure)
        hparams.write_events(self._hparams_folder, self.study, results)
        complete = found["completed"] == found["members"]
        self.record = self.record.replace(status=COMPLETED if complete else FAILED, summary=summary.SUMMARY_JSON)
        self.record.write(self.folder)
        print(summary.markdown(found), end="")
        print(
            f"summary: {self.folder / summary.SUMMARY_MARKDOWN}, curves {self.folder / summary.CURVES_PNG},"
            f" score distributions {self.folder / summary.DISTRIBUTIONS_PNG}; TensorBoard's HParams view:"
            f" {self._hparams_folder}"
        )
        if not complete:
            print(
                f"study {self.record.study_id}: {found['members'] - found['completed']} member(s) not completed"
                " (named above)",
                file=sys.stderr,
            )
        return 0 if complete else EXIT_FAILED

    def _share_done(self) -> int:
        """A share is done when each of its members ended, completed or failed (its error recorded): exit 0; a member
        left otherwise (its trial's worker died) exits 1, and the same command line continues it. The whole study's
        summary is `study --resume <study-id>`'s, which gathers the shares."""
        share = shares.Share.of(self.record)
        completed = sum(member.status == COMPLETED for member in self.record.members)
        ended = all(member.status in (COMPLETED, FAILED) for member in self.record.members)
        self.record = self.record.replace(status=COMPLETED if completed == len(self.record.members) else FAILED)
        self.record.write(self.folder)
        whole = buildinfo.harness_command(
            "study", self.record.module, "--resume", share.study_id, *(["--smoke"] if self.record.smoke else [])
        )
        print(
            f"study {share.study_id}: share {share.index}/{share.count} ended, {completed} of its"
            f" {len(self.record.members)} member(s) completed; the whole study's summary: `{whole}`"
        )
        return 0 if ended else EXIT_FAILED

    def _summary_not_written(self, failure: OSError) -> int:
        """The summary files could not be written (a full disk): they stay as they were, the record says `failed`
        and one line names the problem and the command that writes the summary once there is room."""
        problem = (
            execution.no_space_left(self.results_root, "--results-dir")
            if failure.errno in execution.DISK_FULL
            else f"{failure.strerror or failure}: {failure.filename}"
        )
        kept = "study.json says failed"
        try:
            self.record = self.record.replace(status=FAILED, summary=None)
            self.record.write(self.folder)
        except OSError:
            kept = "study.json could not say so either (it reads as crashed)"
        print(
            f"study {self.record.study_id}: its summary could not be written ({problem}); {kept}, every member's"
            f" run is kept; make room there and write the summary with `{self.resume_command()}`",
            file=sys.stderr,
        )
        return EXIT_FAILED

    def _adopt(self, groups: list[str]) -> int:
        """A study of finished runs: `agent=id,id` groups (their seeds come from the runs' manifests).

        A resumed run brings the runs it continues (`--resume-from`), so its member's curve starts at 0.
        """
        members, results = [], []
        for group in groups:
            agent, _, ids = group.partition("=")
            if agent not in self.study.agents or not ids:
                raise UsageError(
                    f"--runs {group!r}: expected AGENT=RUN_ID[,RUN_ID...] with AGENT one of"
                    f" {', '.join(self.study.agents)}"
                )
            for run_id in ids.split(","):
                run = finder.find_run(run_id, [str(self.results_root)])
                results_root = RunLayout.of_run(run.run_dir, run.manifest).results_root
                setting = tuple(sorted((run.manifest.options.get("set") or {}).items()))
                member = MemberRecord(agent, run.manifest.seed, _attempts(run, results_root), setting=setting)
                results.append(summary.load_member(results_root, member))
                members.append(_as_recorded(member, results[-1]))
        summary.check_comparable(results)  # before anything is written
        self.record = self.record.replace(members=tuple(members), smoke=results[0].last.smoke)
        self.record.write(self.folder)
        return self._summarise(results)


def _check_fits_this_machine(cpus_per_trial: int, max_concurrent: int | None) -> None:
    """UsageError when a trial, or `max_concurrent` trials at once, need more CPUs than this machine has:
    Tune would wait for them forever."""
    cpus, source = hardware.usable_cpu_count()
    if cpus_per_trial > cpus:
        raise UsageError(
            f"--cpus-per-trial {cpus_per_trial} exceeds the {cpus} CPU(s) this machine has ({source});"
            f" pass --cpus-per-trial {cpus} or fewer, or --ray-address of a cluster with more"
        )
    if max_concurrent is not None and max_concurrent * cpus_per_trial > cpus:
        raise UsageError(
            f"--max-concurrent {max_concurrent} trials of {cpus_per_trial} CPU(s) need"
            f" {max_concurrent * cpus_per_trial}, this machine has {cpus} ({source}); pass --max-concurrent"
            f" {cpus // cpus_per_trial} or fewer"
        )


def _attempts(run: finder.Run, results_root: pathlib.Path) -> tuple[str, ...]:
    """`run`'s id after the ids of the runs it continues, oldest first, looked up beside it in `results_root`.
    A parent that is not there ends the chain with its id, which `summary.load_member` refuses naming the
    folder to restore."""
    chain, parent = [run.run_id], run.manifest.parent_run or {}
    while parent.get("parent_run_id") and parent["parent_run_id"] not in chain:
        chain.insert(0, parent["parent_run_id"])
        folder = RunLayout.find(results_root, chain[0])
        parent = (read_manifest(folder).parent_run or {}) if folder else {}
    return tuple(chain)


def _as_recorded(member: MemberRecord, result: summary.MemberResult, error: str | None = None) -> MemberRecord:
    """`member` with what its runs' manifests say: the last run's status (and error, unless `error` names the
    trial's), the first run's start and the last run's end."""
    if error is None and result.last is not None and result.last.error is not None:
        error = f"{result.last.error.type}: {result.last.error.message}"
    return dataclasses.replace(
        member,
        status=result.status,
        error=error,
        started_at=result.manifests[0].started_at if result.manifests else None,
        ended_at=result.last.ended_at if result.last is not None else None,
    )


def _started_runs(member: MemberRecord, results_root: pathlib.Path) -> MemberRecord:
    """`member` without its last runs that have no folder (planned and never started; or, as the store holds them,
    lost with a node before their records reached it, and the attempt after them that could not resume them)."""
    runs = member.runs
    while runs and RunLayout.find(results_root, runs[-1]) is None:
        runs = runs[:-1]
    return member if runs == member.runs else dataclasses.replace(member, runs=runs)


def run_study(options: argparse.Namespace) -> int:
    """The `study` subcommand: validate (UsageError, nothing written), then run or resume and summarise."""
    return StudyCommand(options).run()
