"""Runs and a study's members as pandas DataFrames, for a notebook or a script.

    from rl.analysis import tables

    runs = tables.runs(["experiments/mess3/results"], experiment="reward_only")   # a row per run
    runs.groupby("overrides.ppo/lr")["outcome.scores.normalised_value.greedy.mean"].describe()
    members = tables.study_members("experiments/mess3/results", "20261205T141746Z-398cbb")  # a row per member
    members.pivot(index="seed", columns="agent", values="normalised value (greedy)")

`runs` holds what `rl-harness runs --csv` prints (`catalog.run_rows`: id, experiment, status, seed,
start, duration, commit, dirty, then `overrides.<key>`, `final_metrics.<key>` and `outcome.<path>`
columns). pandas is imported inside the loaders only: it is slow to import, and nothing else here needs it.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rl.harness import RecordError, scan_runs
from rl.harness.commands import catalog
from rl.harness.study import COMPLETED, Study, StudyRecord, find_study, summary

if TYPE_CHECKING:
    import pandas


def runs(roots: Sequence[str], *, experiment: str | None = None, status: str | None = None) -> pandas.DataFrame:
    """Every run under `roots` (results folders, or a workspace), oldest start first; filters as `runs` has them.
    A damaged run is a row with its `problem`."""
    import pandas

    columns, rows = catalog.flat_rows(
        catalog.run_rows(*catalog.select_runs(*scan_runs(list(roots)), recipe=experiment, status=status))
    )
    return pandas.DataFrame(rows, columns=columns)


def study_members(results_root: str | pathlib.Path, study_id: str) -> pandas.DataFrame:
    """A row per member of study `study_id` under `results_root`: agent, variant (the agent with its setting),
    seed, status, its runs, the first run's start and the last one's end, the compute time of its runs, and
    each of the study's scores (missing where the member did not complete or its run did not report one).
    RecordError naming the fix when the study or one of its runs is not there."""
    import pandas

    folder = find_study(pathlib.Path(results_root), study_id)
    if folder is None:
        raise RecordError(f"no study {study_id!r} under {results_root}; pass the results folder it was run with")
    record = StudyRecord.read(folder)
    study = Study.from_description(record.grid)
    rows = []
    for member in record.members:
        result = summary.load_member(pathlib.Path(results_root), member)
        outcome = result.outcome() if result.status == COMPLETED else {}
        rows.append(
            {
                "study_id": record.study_id,
                "agent": member.agent,
                "variant": member.member.variant,
                "seed": member.seed,
                **{f"setting.{key}": value for key, value in member.setting},
                "status": result.status,
                "run_id": member.last_run,
                "runs": list(member.runs),
                "started_at": result.manifests[0].started_at if result.manifests else None,
                "ended_at": result.last.ended_at if result.last is not None else None,
                "duration_s": result.duration_seconds,
                **{score.name: score.read(outcome) for score in study.scores},
            }
        )
    return pandas.DataFrame(rows)
