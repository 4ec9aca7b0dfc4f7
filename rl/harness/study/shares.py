"""A study split into fixed shares of its members, each run by its own `study --share INDEX/COUNT`, gathered back
into one study.

    share = shares.Share.parse("20261206T120000Z-ab12cd", "1/3")   # member i belongs to share i mod 3
    share.record_id                        # "20261206T120000Z-ab12cd.share-1-of-3": the share's own study record
    share.members(study.members())         # the members it runs, in the study's order
    whole = shares.gather("20261206T120000Z-ab12cd", records)   # the shares' records as the whole study's

Each share is an ordinary study record of its members (its own folders, mirrored to the store), which
names the whole study in its `share` field; its members' runs are named after the whole study
(`<study-id>-<agent>-s<seed>`), as the same study's members run on one machine. The whole study's
record is the union of its shares' members in the study's order: a member whose share never
recorded it is pending.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from rl.harness.errors import UsageError
from rl.harness.run.status import run_id_problem
from rl.harness.study.declaration import Member, Study
from rl.harness.study.record import RUNNING, MemberRecord, StudyRecord

_SHARE = re.compile(r"(\d+)/(\d+)")


@dataclasses.dataclass(frozen=True)
class Share:
    study_id: str  # the whole study's
    index: int
    count: int

    @classmethod
    def parse(cls, study_id: str | None, text: str) -> Share:
        """`INDEX/COUNT` of study `study_id`; UsageError naming the form otherwise."""
        match = _SHARE.fullmatch(text)
        if study_id is None:
            raise UsageError(f"--share {text} runs a share of one study: name it with --study-id")
        if not match or not int(match.group(1)) < int(match.group(2)):
            raise UsageError(
                f"--share {text!r}: expected INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/3 (member i runs in share"
                " i mod COUNT)"
            )
        if problem := run_id_problem(study_id):
            raise UsageError(problem.replace("run id", "study id"))
        return cls(study_id, int(match.group(1)), int(match.group(2)))

    @classmethod
    def of(cls, record: StudyRecord) -> Share | None:
        """The share `record` holds, or None for a whole study's record."""
        return cls(**record.share) if record.share else None

    @property
    def record_id(self) -> str:
        return f"{self.study_id}.share-{self.index}-of-{self.count}"

    def members(self, members: Sequence[Member]) -> tuple[Member, ...]:
        return tuple(member for position, member in enumerate(members) if position % self.count == self.index)


def is_share_of(study_id: str, candidate: str) -> bool:
    """Whether study id `candidate` names a share of study `study_id`."""
    return re.fullmatch(rf"{re.escape(study_id)}\.share-(\d+)-of-(\d+)", candidate) is not None


def gather(study_id: str, records: Sequence[StudyRecord]) -> StudyRecord:
    """The whole study `study_id` from its shares' records (UsageError when they are not shares of it, or of
    different studies): every member of the study in its order, as its share recorded it, else pending."""
    found = [Share.of(record) for record in records]
    if not records or any(share is None or share.study_id != study_id for share in found):
        raise UsageError(f"the records given are not shares of study {study_id}; gather the shares it was run in")
    first = records[0]
    if any((record.module, record.grid, record.smoke) != (first.module, first.grid, first.smoke) for record in records):
        raise UsageError(
            f"the shares of study {study_id} differ in module, grid or smoke; they are not one study's shares"
        )
    recorded = {member.member: member for record in records for member in record.members}
    members = tuple(
        recorded.get(member, MemberRecord(member.agent, member.seed, setting=member.setting))
        for member in Study.from_description(first.grid).members()
    )
    return first.replace(
        study_id=study_id,
        members=members,
        share=None,
        status=RUNNING,
        summary=None,
        command_lines=tuple(line for record in records for line in record.command_lines),
    )
