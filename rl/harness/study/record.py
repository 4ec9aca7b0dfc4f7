"""A study's own record, `<results>/[smoke/]studies/<study-id>/study.json`: grid, code, members and their runs.

    record = StudyRecord.new("mess3-belief", module="experiments.mess3.belief_study", study=STUDY, smoke=False,
                             code=..., build=..., command_line=sys.argv)
    record.write(folder)                      # atomically; every change of a member's state rewrites it
    record = StudyRecord.read(folder)         # RecordError naming the file and the fix if damaged
    record.effective_status                   # "crashed" for a running study whose command was killed

Each member (agent, seed) lists its runs in order: the first attempt, then any run that resumed
it after an interruption (`--resume-from` the previous one) or retried it. The runs' own manifests
stay the truth about them; the statuses here are what the study last saw.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping
from typing import Any

from rl.harness.run import records, redaction
from rl.harness.run.status import (  # noqa: F401 - statuses re-exported
    COMPLETED,
    CRASHED,
    FAILED,
    INTERRUPTED,
    RUNNING,
    WriterProcess,
    run_id_problem,
    this_process,
    utc_now,
    writer_gone,
)
from rl.harness.study.declaration import Member, Study

STUDY_FILE = "study.json"
STUDIES_DIR = "studies"
SCHEMA_VERSION = 1

# A member is `pending` until its first run starts, then its last run's status. A study is `running`,
# `interrupted`, `completed` (every member completed), `failed` (some did not) or `refused` (see summary).
PENDING, REFUSED = "pending", "refused"


def study_folder(results_root: pathlib.Path, study_id: str, smoke: bool) -> pathlib.Path:
    return pathlib.Path(results_root, *([records.SMOKE_DIR] if smoke else []), STUDIES_DIR, study_id)


def find_study(results_root: pathlib.Path, study_id: str) -> pathlib.Path | None:
    """The folder of study `study_id` under `results_root`, full or smoke, or None."""
    found = [
        folder for folder in (study_folder(results_root, study_id, smoke) for smoke in (False, True)) if folder.is_dir()
    ]
    return found[0] if found else None


@dataclasses.dataclass(frozen=True)
class MemberRecord:
    agent: str
    seed: int
    runs: tuple[str, ...] = ()
    status: str = PENDING
    started_at: str | None = None  # the first run's start and the last run's end: the member's wall-clock span
    ended_at: str | None = None
    error: str | None = None
    setting: tuple[
        tuple[str, Any], ...
    ] = ()  # its setting on the study's hyperparameters axis: this member's --set overrides

    @property
    def member(self) -> Member:
        return Member(self.agent, self.seed, self.setting)

    @property
    def last_run(self) -> str | None:
        return self.runs[-1] if self.runs else None


@dataclasses.dataclass(frozen=True)
class StudyRecord:
    study_id: str
    module: str
    smoke: bool
    grid: Mapping[str, Any]
    code: Mapping[str, Any]
    build: Mapping[str, Any]
    command_lines: tuple[tuple[str, ...], ...]  # the study's first invocation, then each resume
    members: tuple[MemberRecord, ...]
    status: str = RUNNING
    created_at: str = dataclasses.field(default_factory=utc_now)
    updated_at: str = dataclasses.field(default_factory=utc_now)
    summary: str | None = None  # the summary file, once written
    schema_version: int = SCHEMA_VERSION
    stop_at_env_steps: int | None = None  # every member's run capped here (`study --stop-at-env-steps`)
    process: WriterProcess | None = None  # the study command running it (None in records that predate it)
    share: Mapping[str, Any] | None = None  # a share of a study (study/shares.py): study_id, index, count

    @property
    def effective_status(self) -> str:
        """The recorded status, except a `running` study whose command is gone (killed) reads as `crashed`."""
        if self.status == RUNNING and self.process is not None and writer_gone(self.process):
            return CRASHED
        return self.status

    @classmethod
    def new(
        cls,
        study_id: str,
        *,
        module: str,
        study: Study,
        smoke: bool,
        code: Mapping,
        build: Mapping,
        command_line,
        stop_at_env_steps: int | None = None,
    ) -> StudyRecord:
        return cls(
            study_id=study_id,
            module=module,
            smoke=smoke,
            grid=study.describe(),
            code=dict(code),
            build=dict(build),
            command_lines=(redaction.redact_all(command_line),),
            stop_at_env_steps=stop_at_env_steps,
            process=this_process(),
            members=tuple(MemberRecord(m.agent, m.seed, setting=m.setting) for m in study.members()),
        )

    def member(self, member: Member) -> MemberRecord:
        return next(record for record in self.members if record.member == member)

    def with_member(self, updated: MemberRecord) -> StudyRecord:
        members = tuple(updated if record.member == updated.member else record for record in self.members)
        return dataclasses.replace(self, members=members, updated_at=utc_now())

    def replace(self, **changes) -> StudyRecord:
        return dataclasses.replace(self, **changes, updated_at=utc_now())

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def write(self, folder: pathlib.Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        records.write_json_atomically(str(folder / STUDY_FILE), self.to_dict())

    @classmethod
    def read(cls, folder: pathlib.Path) -> StudyRecord:
        path = folder / STUDY_FILE
        document = records.read_json(str(path), "study record")
        try:
            if document.get("schema_version") != SCHEMA_VERSION:
                raise ValueError(f"schema_version {document.get('schema_version')!r}, expected {SCHEMA_VERSION}")
            members = tuple(
                MemberRecord(
                    **{
                        **member,
                        "runs": tuple(member["runs"]),
                        "setting": tuple(tuple(pair) for pair in member.get("setting", ())),
                    }
                )
                for member in document["members"]
            )
            process = document.get("process")
            record = cls(
                **{
                    **document,
                    "members": members,
                    "process": WriterProcess(**process) if process else None,
                    "command_lines": tuple(tuple(line) for line in document["command_lines"]),
                }
            )
            _check_names(record)
            return record
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise records.RecordError(
                f"study record {path} is damaged ({type(error).__name__}: {error}); restore it"
                " from version control or start a new study"
            ) from None


def _check_names(record: StudyRecord) -> None:
    """ValueError unless the study id and every member's run id are plain names.

    They become paths (where the study writes, which runs it reads): an edited record must not lead outside.
    """
    for name in (record.study_id, *(run_id for member in record.members for run_id in member.runs)):
        if not isinstance(name, str) or (problem := run_id_problem(name)):
            raise ValueError(problem or f"{name!r} is not a name")
