"""A study in TensorBoard's HParams dashboard: each completed member a session, its agent, seed and
setting the hyperparameters, its scores the metrics. A view of the summary, written beside the
study's artifacts (never into results/), each time the summary is.

    hparams.write_events(study_folder(artifacts_root, study_id, smoke) / hparams.EVENTS_DIR, study, results)
    bazel run //tools:tensorboard -- artifacts/studies/<study-id>      # the HPARAMS tab: table, parallel coordinates

The folder holds the experiment (which hyperparameters and metrics there are) in its own event
file and one subfolder per member, `<agent>-s<seed>` (the variant's setting index too, with a
hyperparameters axis), with that member's session and its scores as scalars at step 0. The events
are TensorBoard's own protobufs (tensorboard.plugins.hparams, no TensorFlow) framed as
`run/tensorboard_events.py` frames a run's.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterable

from rl.harness.run import records
from rl.harness.run.tensorboard_events import tf_record
from rl.harness.study.declaration import Study
from rl.harness.study.record import COMPLETED
from rl.harness.study.summary import MemberResult

EVENTS_DIR = "tensorboard"
SCORE_TAG = "score/"  # a score's metric tag: score/<score name>


def _events(*events) -> bytes:
    from tensorboard.compat.proto import event_pb2

    version = event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")
    return b"".join(tf_record(event.SerializeToString()) for event in (version, *events))


def write_events(folder: pathlib.Path, study: Study, results: Iterable[MemberResult]) -> None:
    """The study's HParams events in `folder`; a later summary of the same study writes the same files again."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.hparams import summary_v2 as hparams

    completed = [result for result in results if result.status == COMPLETED]
    settings = study.settings()
    keys = list(study.hyperparameters)
    folder.mkdir(parents=True, exist_ok=True)  # a resumed study's summary rewrites the same files
    experiment = hparams.hparams_config_pb(
        hparams=[hparams.HParam("agent"), hparams.HParam("seed"), *(hparams.HParam(key) for key in keys)],
        metrics=[hparams.Metric(SCORE_TAG + score.name, display_name=score.name) for score in study.scores],
    )
    records.write_bytes_atomically(
        str(folder / "events.out.tfevents.0.study"), _events(event_pb2.Event(wall_time=time.time(), summary=experiment))
    )
    for result in completed:
        member = result.member
        variant = f"-v{settings.index(member.setting)}" if keys and member.setting in settings else ""
        values = {"agent": member.agent, "seed": member.seed, **dict(member.setting)}
        session = hparams.hparams_pb(values, trial_id=member.name)
        outcome = result.outcome()
        scores = [
            summary_pb2.Summary.Value(tag=SCORE_TAG + score.name, simple_value=value)
            for score in study.scores
            if (value := score.read(outcome)) is not None
        ]
        member_folder = folder / f"{member.agent}{variant}-s{member.seed}"
        member_folder.mkdir(exist_ok=True)
        records.write_bytes_atomically(
            str(member_folder / "events.out.tfevents.0.member"),
            _events(
                event_pb2.Event(wall_time=time.time(), summary=session),
                event_pb2.Event(wall_time=time.time(), step=0, summary=summary_pb2.Summary(value=scores)),
            ),
        )
