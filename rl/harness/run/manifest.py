"""The run manifest as typed, frozen records: what `run_manifest.json` holds, read and written in one place.

    from rl.harness.run import manifest

    document = manifest.read_manifest(run_dir)          # RunManifest; RecordError naming the fix (schema 1 or 2)
    document.status, document.run_id, document.smoke, document.experiment.module
    document.runner                                     # DirectRunnerRecord | TuneRunnerRecord | AgentsInTurnRunnerRecord | OwnLoopRunnerRecord | None
    document.checkpoints[-1].path                       # CheckpointEntry, relative to the artifacts folder
    document.outputs                                    # OutputEntry per file the run's stages wrote
    document.to_dict()                                  # what run_manifest.json holds
    document.effective_status                           # "crashed" for a running record whose writer is gone

Reading checks every field that reaches a process or a loader against a strict form
(`check_process_fields`: build.target a Bazel label, commits git ids; checkpoint paths relative and
inside the run's folder): a manifest someone shared is data, never a command.

A new run's manifest, with its provenance, is gathered by `run/begin.py`.

Schema 2 added `outputs` and typed the runner section; schema 3 added `platform` (run/platform.py:
the numeric platform, typed) and `rolling_checkpoints`. Manifests of schemas 1 and 2 read as
schema 3 with no outputs (schema 1), `platform` None (unknown) and no rolling checkpoint. Provenance blocks (code, build, versions, hardware, cluster)
stay mappings: they are recorded as found and compared whole by `diff`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Union

from rl.harness.run import records
from rl.harness.run import status as run_status
from rl.harness.run.platform import NumericPlatform
from rl.harness.run.status import Heartbeat, WriterProcess

MANIFEST_SCHEMA_VERSION = 3
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
# A recipe's or study's module: `experiments.mess3.reward_only`.
DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# Fields that reach a process (Bazel, git) have a strict form, checked when a manifest is read:
# a shared record is data, and `--workspace_status_command=...` in build.target would be a command.
# A Bazel label of this workspace: `//experiments/mess3:reward_only` (no segment starts with a dot or dash).
BAZEL_LABEL = re.compile(
    r"//(?:[A-Za-z0-9_][A-Za-z0-9_.\-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*)?"
    r":[A-Za-z0-9_][A-Za-z0-9_.\-]*"
)
GIT_COMMIT = re.compile(r"[0-9a-f]{4,64}")  # git abbreviates to 4 digits at least


def relative_path_problem(path: object) -> str | None:
    """Why `path` is not a plain relative path inside its folder (absolute, empty, `..`), or None."""
    if not isinstance(path, str) or not path:
        return "is not a path"
    pure = pathlib.PurePosixPath(path)
    if pure.is_absolute() or "\\" in path or ".." in pure.parts:
        return "is not a path relative to the run's artifacts folder"
    return None


def check_process_fields(record: Mapping) -> None:
    """ValueError unless build.target is a Bazel label and every recorded commit is a hexadecimal git id."""
    build = record.get("build") or {}
    target = build.get("target")
    if target is not None and not (isinstance(target, str) and BAZEL_LABEL.fullmatch(target)):
        raise ValueError(f"build.target {target!r} is not a Bazel label (//package:name)")
    for name, repo in (record.get("code") or {}).items():
        commit = repo.get("commit") if isinstance(repo, Mapping) else None
        if commit is not None and not (isinstance(commit, str) and GIT_COMMIT.fullmatch(commit)):
            raise ValueError(f"code.{name}.commit {commit!r} is not a git commit id")


def _tuple(values) -> tuple:
    return tuple(values or ())


@dataclasses.dataclass(frozen=True)
class ExperimentRecord:
    """The recipe that ran: its dotted module and the sha256 of its source file."""

    module: str | None
    source_file: str | None = None
    source_sha256: str | None = None

    def __post_init__(self):
        # The module names folders and B2 keys (TensorBoard's tree, remote prefixes): a plain dotted name only.
        if self.module is not None and not (isinstance(self.module, str) and DOTTED_NAME.fullmatch(self.module)):
            raise ValueError(f"experiment.module {self.module!r} is not a dotted module name")


@dataclasses.dataclass(frozen=True)
class RunError:
    """Why a failed run failed: the exception's type and message (the traceback is in traceback.txt)."""

    type: str
    message: str


@dataclasses.dataclass(frozen=True)
class CheckpointEntry:
    """A saved checkpoint; `path` is relative to the run's artifacts folder; `trial_id` names its line (agent, Tune trial)."""

    path: str
    iteration: int | None
    env_steps: int | None
    saved_at: str | None = None
    trial_id: str | None = None

    @classmethod
    def from_dict(cls, record: Mapping) -> CheckpointEntry:
        # A checkpoint is loaded (pickles): its recorded path never leads out of the run's artifacts folder.
        problem = relative_path_problem(record["path"])
        if problem:
            raise ValueError(f"checkpoint path {record['path']!r} {problem}")
        return cls(
            path=record["path"],
            iteration=record.get("iteration"),
            env_steps=record.get("env_steps"),
            saved_at=record.get("saved_at"),
            trial_id=record.get("trial_id"),
        )

    def to_dict(self) -> dict:
        entry = dataclasses.asdict(self)
        if self.trial_id is None:
            del entry["trial_id"]
        return entry


@dataclasses.dataclass(frozen=True)
class OutputEntry:
    """A file a stage of the run wrote (`RunContext.write_output`): `path` relative to the run's `place` folder."""

    name: str
    place: str  # "results" (small, committed) or "artifacts" (large, git-ignored)
    path: str
    bytes: int
    sha256: str
    written_at: str

    @classmethod
    def from_dict(cls, record: Mapping) -> OutputEntry:
        return cls(**{field.name: record[field.name] for field in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class ResumeSource:
    """Where a resumed run starts from; the counters are the checkpoint's (None if unknown)."""

    checkpoint: pathlib.Path | None  # a checkpoint folder (direct runner, own loops)
    parent_run_id: str | None = None  # set when --resume-from named a run
    tune_experiment: pathlib.Path | None = None  # the parent's Tune storage (Tune runner)
    iteration: int | None = None
    env_steps: int | None = None
    experiment: str | None = None  # the recipe that saved it (None: a bare RLlib checkpoint)
    # What the resumed run takes over (`RunSession.carry`), not recorded as such: the parent's science
    # checkpoints up to the one resumed from (each `path` a folder on this machine, found in a trusted
    # artifacts folder), the metrics files of the lineage up to it (oldest first), and whether the parent
    # completed (then a resume with no training left has nothing to do).
    carried_checkpoints: tuple[CheckpointEntry, ...] = ()
    carried_metrics: tuple[pathlib.Path, ...] = ()
    parent_completed: bool = False

    def as_dict(self) -> dict:
        return {
            field.name: (str(value) if isinstance(value, pathlib.Path) else value)
            for field in dataclasses.fields(self)
            if field.name not in _CARRIED
            for value in [getattr(self, field.name)]
        }


_CARRIED = frozenset({"carried_checkpoints", "carried_metrics", "parent_completed"})


# -- the runner section: one tagged union ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DirectRunnerRecord:
    """RLlib's train loop in this driver (`runners.run_direct`). Fields older manifests lack read as None."""

    KIND: ClassVar[str] = "direct"
    algorithm: str | None = None
    rllib_seed: int | None = None
    sampling: Mapping[str, Any] | None = None
    determinism: Mapping[str, Any] | None = None
    stop: Mapping[str, Any] | None = None
    checkpoint_schedule: Mapping[str, Any] | None = None
    checkpoint_initial: bool | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # fields this harness does not know


@dataclasses.dataclass(frozen=True)
class TuneRunnerRecord:
    """One Ray Tune trial per seed (`runners.run_tune`); `storage` is relative to the artifacts folder."""

    KIND: ClassVar[str] = "tune"
    algorithm: str | None = None
    trial_seeds: tuple = ()
    storage: str | None = None
    sampling: Mapping[str, Any] | None = None
    determinism: Mapping[str, Any] | None = None
    stop: Mapping[str, Any] | None = None
    checkpoint_every: int | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class AgentRecord:
    """One agent of an AgentsInTurnRunnerRecord: what a DirectRunnerRecord records, per agent."""

    algorithm: str | None = None
    rllib_seed: int | None = None
    sampling: Mapping[str, Any] | None = None
    determinism: Mapping[str, Any] | None = None
    env_runner_nodes: tuple | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class AgentsInTurnRunnerRecord:
    """Several agents trained one after another in one run (`agents.train_in_turn`)."""

    KIND: ClassVar[str] = "agents in turn"
    stop: Mapping[str, Any] | None = None
    agents: Mapping[str, AgentRecord] = dataclasses.field(default_factory=dict)
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class OwnLoopRunnerRecord:
    """A recipe's own loop (in-process workers, sequential runs): its kind and what it chose to record."""

    kind: str
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)


RunnerRecord = Union[DirectRunnerRecord, TuneRunnerRecord, AgentsInTurnRunnerRecord, OwnLoopRunnerRecord]
_TYPED_RUNNERS = {runner.KIND: runner for runner in (DirectRunnerRecord, TuneRunnerRecord, AgentsInTurnRunnerRecord)}


def _typed(cls, record: Mapping, **converted):
    """`cls` from a record's known fields (and `converted` ones); unknown fields are kept in `extra`."""
    names = {field.name for field in dataclasses.fields(cls)} - {"extra"}
    return cls(
        **{key: value for key, value in record.items() if key in names},
        **converted,
        extra={key: value for key, value in record.items() if key not in names},
    )


def _untyped(record) -> dict:
    """The record's fields as written: an unset (None) field is left out, as the writers that predate it left it."""
    fields = {
        field.name: getattr(record, field.name)
        for field in dataclasses.fields(record)
        if field.name != "extra" and getattr(record, field.name) is not None
    }
    return {**record.extra, **fields}


def runner_kind(runner: RunnerRecord) -> str:
    return runner.kind if isinstance(runner, OwnLoopRunnerRecord) else runner.KIND


def runner_determinism(runner: RunnerRecord | None) -> Mapping[str, Any]:
    """Whether the same seed gives the same rows ({"expected": bool, "why": str}), as the runner recorded it."""
    if isinstance(runner, AgentsInTurnRunnerRecord) and runner.agents:
        each = [agent.determinism for agent in runner.agents.values()]
        return {
            "expected": all(d.get("expected") for d in each),
            "why": "; ".join(sorted({d.get("why", "") for d in each})),
        }
    recorded = (
        runner.details.get("determinism")
        if isinstance(runner, OwnLoopRunnerRecord)
        else getattr(runner, "determinism", None)
    )
    return recorded or {
        "expected": False,
        "why": "the recipe ran its own loop and recorded nothing: the harness cannot tell",
    }


def runner_from_dict(record: Mapping | None) -> RunnerRecord | None:
    if record is None:
        return None
    fields = {key: value for key, value in record.items() if key != "kind"}
    typed = _TYPED_RUNNERS.get(record.get("kind"))
    if typed is None:
        return OwnLoopRunnerRecord(kind=str(record.get("kind")), details=fields)
    if typed is AgentsInTurnRunnerRecord:
        agents = {
            name: _typed(
                AgentRecord,
                {k: v for k, v in agent.items() if k != "env_runner_nodes"},
                env_runner_nodes=None if agent.get("env_runner_nodes") is None else tuple(agent["env_runner_nodes"]),
            )
            for name, agent in (fields.pop("agents", None) or {}).items()
        }
        return _typed(AgentsInTurnRunnerRecord, fields, agents=agents)
    if typed is TuneRunnerRecord:
        return _typed(
            TuneRunnerRecord,
            {k: v for k, v in fields.items() if k != "trial_seeds"},
            trial_seeds=tuple(fields.get("trial_seeds") or ()),
        )
    return _typed(typed, fields)


def runner_to_dict(runner: RunnerRecord | None) -> dict | None:
    if runner is None:
        return None
    if isinstance(runner, OwnLoopRunnerRecord):
        return {"kind": runner.kind, **runner.details}
    document = {"kind": runner.KIND, **_untyped(runner)}
    if isinstance(runner, AgentsInTurnRunnerRecord):
        document["agents"] = {name: _untyped(agent) for name, agent in runner.agents.items()}
    if isinstance(runner, TuneRunnerRecord):
        document["trial_seeds"] = list(runner.trial_seeds)
    return document


# -- the manifest ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunManifest:
    """One run's `run_manifest.json`: provenance (written before the recipe runs) and its lifecycle so far.

    Build a new one with `begin.new_manifest(...)`; the session replaces fields as the run goes
    (`dataclasses.replace`), and writes `to_dict()` atomically.
    """

    run_id: str | None
    status: str | None
    experiment: ExperimentRecord
    seed: int | None
    options: Mapping[str, Any]
    paths: Mapping[str, Any]
    code: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    build: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    versions: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    hardware: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    platform: NumericPlatform | None = None  # None: recorded before schema 3, unknown
    command_line: tuple = ()
    process_command_line: tuple = ()
    parent_run: Mapping[str, Any] | None = None
    runner: RunnerRecord | None = None
    cluster: Mapping[str, Any] | None = None
    remote: Mapping[str, Any] | None = None
    started_at: str | None = None
    ended_at: str | None = None
    heartbeat: Heartbeat | None = None
    process: WriterProcess | None = None
    checkpoints: tuple[CheckpointEntry, ...] = ()
    # The latest-state checkpoint of each line (at most one per trial_id), for resuming only: never probed.
    rolling_checkpoints: tuple[CheckpointEntry, ...] = ()
    outputs: tuple[OutputEntry, ...] = ()
    error: RunError | None = None
    exit_code: int | None = None
    interrupted_by: str | None = None
    budget_cap: Mapping[str, Any] | None = None  # --stop-at-*: {"key": counter, "bound": N}
    seed_streams: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    reproduction: Mapping[str, Any] | None = None  # `rl-harness reproduce`'s verdict
    schema_version: int = MANIFEST_SCHEMA_VERSION
    # Sections this harness does not know (a newer minor writer, a recipe's own): kept, written back.
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def smoke(self) -> bool:
        """Whether the run was a smoke run, as its options say (never guessed from folder names)."""
        smoke = self.options.get("smoke")
        if not isinstance(smoke, bool):
            raise records.RecordError(
                f"the manifest of run {self.run_id!r} records no options.smoke, so where its folders"
                " are is unknown; it was not written by rl-harness (or was edited)"
            )
        return smoke

    def crash_reason(self, now: float | None = None) -> str | None:
        """Why this manifest, still marked running, belongs to a dead run (stale heartbeat, writer gone), or None."""
        return run_status.crash_reason(self.status, self.heartbeat, self.process, now)

    @property
    def effective_status(self) -> str:
        """The recorded status, except a running record whose writer is gone reads as "crashed"."""
        return run_status.CRASHED if self.crash_reason() else (self.status or "unknown")

    @property
    def duration_seconds(self) -> float | None:
        """Start to end; for a run without an end (running, crashed), start to its last heartbeat; None unknown."""
        end = self.ended_at or (self.heartbeat.at if self.heartbeat is not None else None)
        if not self.started_at or not end:
            return None
        return max(0.0, run_status.parse_time(end) - run_status.parse_time(self.started_at))

    def checkpoints_of(self, trial_id: str | None) -> tuple[CheckpointEntry, ...]:
        """The checkpoints of one line (an agent, a Tune trial; None: the run's own)."""
        return tuple(entry for entry in self.checkpoints if entry.trial_id == trial_id)

    def resumable_checkpoint(self) -> CheckpointEntry | None:
        """The newest checkpoint of the run's own line, science or rolling: where a resume starts."""
        candidates = [entry for entry in (*self.checkpoints, *self.rolling_checkpoints) if entry.trial_id is None]
        return max(candidates, key=lambda entry: (entry.iteration or 0, entry.env_steps or 0), default=None)

    @classmethod
    def from_dict(cls, record: Mapping, path: str = "run_manifest.json") -> RunManifest:
        """A manifest of any readable schema; RecordError naming the fix for another schema or a broken one."""
        version = record.get("schema_version") if isinstance(record, Mapping) else None
        if version not in READABLE_SCHEMA_VERSIONS:
            raise records.RecordError(
                f"{path} has schema_version {version!r}; this harness reads"
                f" {', '.join(map(str, READABLE_SCHEMA_VERSIONS))}: use the rl-harness version that"
                " wrote it"
            )
        known = {field.name for field in dataclasses.fields(cls)} - {"extra"}
        try:
            check_process_fields(record)
            heartbeat, process, error = record.get("heartbeat"), record.get("process"), record.get("error")
            return cls(
                schema_version=MANIFEST_SCHEMA_VERSION,
                run_id=record.get("run_id"),
                status=record.get("status"),
                experiment=ExperimentRecord(**(record.get("experiment") or {"module": None})),
                seed=record.get("seed"),
                options=dict(record.get("options") or {}),
                paths=dict(record.get("paths") or {}),
                code=record.get("code") or {},
                build=record.get("build") or {},
                versions=record.get("versions") or {},
                hardware=record.get("hardware") or {},
                platform=NumericPlatform.from_dict(record.get("platform")),
                command_line=_tuple(record.get("command_line")),
                process_command_line=_tuple(record.get("process_command_line")),
                parent_run=record.get("parent_run"),
                runner=runner_from_dict(record.get("runner")),
                cluster=record.get("cluster"),
                remote=record.get("remote"),
                started_at=record.get("started_at"),
                ended_at=record.get("ended_at"),
                heartbeat=Heartbeat(**heartbeat) if heartbeat else None,
                process=WriterProcess(**process) if process else None,
                checkpoints=tuple(CheckpointEntry.from_dict(entry) for entry in record.get("checkpoints") or ()),
                rolling_checkpoints=tuple(
                    CheckpointEntry.from_dict(entry) for entry in record.get("rolling_checkpoints") or ()
                ),
                outputs=tuple(OutputEntry.from_dict(entry) for entry in record.get("outputs") or ()),
                error=RunError(**error) if error else None,
                exit_code=record.get("exit_code"),
                interrupted_by=record.get("interrupted_by"),
                budget_cap=record.get("budget_cap"),
                seed_streams=record.get("seed_streams") or {},
                reproduction=record.get("reproduction"),
                extra={key: value for key, value in record.items() if key not in known},
            )
        except (TypeError, KeyError, AttributeError, ValueError) as broken:
            raise records.RecordError(
                f"{path} is not a run manifest this harness can read ({type(broken).__name__}:"
                f" {broken}); restore it from git or B2"
            ) from None

    def to_dict(self) -> dict:
        document = {
            field.name: getattr(self, field.name) for field in dataclasses.fields(self) if field.name != "extra"
        }
        document.update(
            experiment=dataclasses.asdict(self.experiment),
            options=dict(self.options),
            paths=dict(self.paths),
            command_line=list(self.command_line),
            process_command_line=list(self.process_command_line),
            runner=runner_to_dict(self.runner),
            platform=None if self.platform is None else self.platform.to_dict(),
            heartbeat=None if self.heartbeat is None else dataclasses.asdict(self.heartbeat),
            process=None if self.process is None else dataclasses.asdict(self.process),
            checkpoints=[entry.to_dict() for entry in self.checkpoints],
            rolling_checkpoints=[entry.to_dict() for entry in self.rolling_checkpoints],
            outputs=[dataclasses.asdict(entry) for entry in self.outputs],
            error=None if self.error is None else dataclasses.asdict(self.error),
        )
        return {**self.extra, **document}


def read_manifest(run_dir) -> RunManifest:
    """The manifest in `run_dir` (results/[smoke/]<run-id>/); RecordError naming the fix when missing or damaged."""
    path = os.path.join(str(run_dir), records.MANIFEST_FILE)
    return RunManifest.from_dict(records.read_json(path, "run manifest"), path)


def json_safe(value):
    """`value` if JSON can hold it, else its repr (a recipe's outcome is recorded either way)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)
