"""A run's metrics as TensorBoard scalars, written while it trains: a view of metrics.jsonl, never the record.

    folder = tensorboard_events.lineage_folder(layout, manifest.parent_run)   # <artifacts>/<run-id>/tensorboard
    events = tensorboard_events.ScalarEvents(folder, run_id, headline={"env_runners/episode_return_mean"})
    events.write({"num_env_steps_sampled_lifetime": 4000, "env_runners/episode_return_mean": 21.5})
    events.write(row, trial="PPO_abc12_00000")    # a Tune trial's (or an agent's) curves: <folder>/<trial>/
    events.close()

Every finite number of a row becomes a scalar of that name at the row's env steps (its training
iteration, or else its row number, when it counts no env steps). A resumed run writes into the
folder of the run it resumed, so its curves continue at later steps; that folder is found through
the parent's manifest (`paths.tensorboard`, followed only when it is a run's events folder under
this run's artifacts root: `is_events_folder_of`), and the parent's events past the checkpoint it resumes
from (rows the resumed run redoes) are cut first (`cut_after`), so no step is drawn twice. A write that fails (a full disk, no tensorboard
installed) is logged once and ends the events of that run; metrics.jsonl is never affected.
The run's summarised metrics (`headline`) also go into a custom-scalars layout, so TensorBoard's
CUSTOM SCALARS tab shows them first (the scalars tab sorts every tag by name).
`bazel run //tools:tensorboard -- <folder>` shows them.
"""

from __future__ import annotations

import math
import pathlib
import re
import struct
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any, BinaryIO

import google_crc32c
from absl import logging

from rl.harness.run import metric_keys, records
from rl.harness.run.layout import RunLayout
from rl.harness.run.manifest import read_manifest
from rl.harness.run.status import run_id_problem

EVENTS_DIR = "tensorboard"
# The counters tried in turn as a row's step: env steps, so runs with other batch sizes line up.
STEP_KEYS = (metric_keys.ENV_STEPS, metric_keys.ITERATION, "harness/row")
HEADLINE_CATEGORY = "headline"  # the custom-scalars category of a run's summarised metrics
MANIFEST_PATH_KEY = "tensorboard"  # the manifest's paths entry that names a run's events folder


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def row_step(row: Mapping[str, Any]) -> int | None:
    """The step a row's scalars are drawn at: the first of STEP_KEYS that it holds as a number."""
    for key in STEP_KEYS:
        value = _number(row.get(key))
        if value is not None:
            return int(value)
    return None


def row_scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """The row's scalars: every key holding a finite number (bools and text are no curves)."""
    return {key: number for key, value in row.items() for number in [_number(value)] if number is not None}


def lineage_folder(layout: RunLayout, parent_run: Mapping[str, Any] | None) -> pathlib.Path:
    """Where a run's events go: its parent's events folder when it resumed a run found here, else its own."""
    own = layout.artifacts_dir / EVENTS_DIR
    parent_id = (parent_run or {}).get("parent_run_id")
    if not parent_id:
        return own
    parent_dir = RunLayout.find(layout.results_root, parent_id)
    try:
        recorded = read_manifest(parent_dir).paths.get(MANIFEST_PATH_KEY) if parent_dir else None
    except records.RecordError as error:
        logging.warning(
            "TensorBoard: cannot read the manifest of parent run %s (%s); this run's curves start in %s",
            parent_id,
            error,
            own,
        )
        return own
    if not recorded:
        logging.warning(
            "TensorBoard: parent run %s recorded no events folder under %s; this run's curves start in %s",
            parent_id,
            layout.results_root,
            own,
        )
        return own
    if not is_events_folder_of(pathlib.Path(recorded), layout.artifacts_root):
        logging.warning(
            "TensorBoard: parent run %s records its events folder as %s, not a run's events folder under"
            " this run's artifacts root %s; this run's curves start in %s (nothing is written there)",
            parent_id,
            recorded,
            layout.artifacts_root,
            own,
        )
        return own
    return pathlib.Path(recorded)


def is_events_folder_of(folder: pathlib.Path, artifacts_root: pathlib.Path) -> bool:
    """True when `folder` is `<artifacts_root>/[smoke/]<run-id>/tensorboard`, links followed.

    A recorded events folder is written to (a resumed run appends, `cut_after` rewrites): a shared
    record must not lead those writes out of the artifacts root given on this machine.
    """
    resolved, root = pathlib.Path(folder).resolve(), pathlib.Path(artifacts_root).resolve()
    if resolved.name != EVENTS_DIR or not resolved.is_relative_to(root):
        return False
    owner = resolved.parent.relative_to(root).parts
    return (len(owner) == 1 or (len(owner) == 2 and owner[0] == records.SMOKE_DIR)) and not run_id_problem(owner[-1])


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of `data`: the CRC rotated right by 15 bits, plus a constant.

    The CRC is google-crc32c's (a C extension); TensorBoard without TensorFlow computes it byte by
    byte in Python, most of a row's cost (docs/performance.md).
    """
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tf_record(data: bytes) -> bytes:
    """`data` framed as a TFRecord (what TensorBoard's RecordWriter writes): length, its masked CRC-32C,
    the data, the data's masked CRC-32C."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_UINT64 = (1 << 64) - 1  # a negative int64 is its two's complement as a varint


class ScalarEventEncoder:
    """A row's scalars as a serialized `Event` protobuf, byte for byte what `event_pb2` gives, without its objects.

        encoder = ScalarEventEncoder()
        data = encoder.encode(wall_time=time.time(), step=4096, scalars={"loss": 0.5})   # tags in name order

    Building ~100 `Summary.Value` messages and serializing them was most of a row's cost; a row's
    tags repeat from row to row, so each tag's field bytes are made once. The fields written:
    Event.wall_time (1, double), Event.step (2, varint), Event.summary (5), Summary.value (1),
    Value.tag (1), Value.simple_value (2, float32: beyond its range it is +-inf, as protobuf's); as
    proto3 does, a zero wall time or step is left out (a simple value is in a oneof: always written).
    """

    def __init__(self):
        self._tags: dict[str, bytes] = {}

    def _tag(self, tag: str) -> bytes:
        field = self._tags.get(tag)
        if field is None:
            encoded = tag.encode()
            field = self._tags[tag] = b"\x0a" + _varint(len(encoded)) + encoded + b"\x15"
        return field

    def encode(self, *, wall_time: float, step: int, scalars: Mapping[str, float]) -> bytes:
        values = []
        for tag in sorted(scalars):
            value = scalars[tag]
            try:
                packed = struct.pack("<f", value)
            except OverflowError:  # struct refuses what protobuf rounds to infinity
                packed = struct.pack("<f", math.copysign(math.inf, value))
            body = self._tag(tag) + packed
            values.append(b"\x0a" + _varint(len(body)) + body)
        summary = b"".join(values)
        return (
            (b"\x09" + struct.pack("<d", wall_time) if wall_time else b"")
            + (b"\x10" + _varint(step & _UINT64) if step else b"")
            + b"\x2a"
            + _varint(len(summary))
            + summary
        )


def read_records(data: bytes) -> list[bytes]:
    """The payloads of a TFRecord stream (`tf_record`'s framing); a torn final record is left out."""
    payloads, offset = [], 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        end = offset + 12 + length + 4
        if end > len(data):
            break
        payloads.append(data[offset + 12 : offset + 12 + length])
        offset = end
    return payloads


def cut_after(folder: pathlib.Path, step: int) -> int:
    """Removes the events past `step` from every event file under `folder`; returns how many it removed.

    A run resumed from a checkpoint redoes the rows its parent logged after it: without the cut, the
    lineage's curves would hold those steps twice. Each file is rewritten atomically; the rows stay
    in the parent's metrics.jsonl, the record.
    """
    from tensorboard.compat.proto import event_pb2

    removed = 0
    for path in sorted(pathlib.Path(folder).rglob("events.out.tfevents.*")):
        payloads = read_records(path.read_bytes())
        kept = [payload for payload in payloads if event_pb2.Event.FromString(payload).step <= step]
        if len(kept) != len(payloads):
            removed += len(payloads) - len(kept)
            records.write_bytes_atomically(str(path), b"".join(map(tf_record, kept)))
    return removed


def headline_order(keys: Iterable[str]) -> list[str]:
    """The headline charts: the return first, then the other keys by name; env steps are the x axis, no chart."""
    charted = (key for key in keys if key != metric_keys.ENV_STEPS)
    return sorted(charted, key=lambda key: (key != metric_keys.RETURN, key))


def headline_layout(keys: Iterable[str]) -> bytes:
    """A custom-scalars layout (TensorBoard's CUSTOM SCALARS tab): one `HEADLINE_CATEGORY` chart per key, in order."""
    from tensorboard.plugins.custom_scalar import layout_pb2

    charts = [
        layout_pb2.Chart(title=key, multiline=layout_pb2.MultilineChartContent(tag=[f"^{re.escape(key)}$"]))
        for key in headline_order(keys)
    ]
    return layout_pb2.Layout(category=[layout_pb2.Category(title=HEADLINE_CATEGORY, chart=charts)]).SerializeToString()


def _layout_event(layout: bytes):
    """The event that carries a custom-scalars layout: a string tensor under the plugin's config tag."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.plugins.custom_scalar import metadata

    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING, string_val=[layout], tensor_shape=tensor_shape_pb2.TensorShapeProto()
    )
    value = summary_pb2.Summary.Value(
        tag=metadata.CONFIG_SUMMARY_TAG, tensor=tensor, metadata=metadata.create_summary_metadata()
    )
    return event_pb2.Event(wall_time=time.time(), step=0, summary=summary_pb2.Summary(value=[value]))


class ScalarEvents:
    """Appends each metrics row as one TensorBoard event per curve group (the run, or one trial).

    Each run writes its own event file (`events.out.tfevents.<time in ns>.<run-id>`) per folder, one
    record per row, flushed, so a TensorBoard watching the folder sees every row as it is logged.
    `headline` (the run's summarised keys, read at each file's first row) become the charts of the
    CUSTOM SCALARS tab, so the curves a recipe cares about come first, not among RLlib's internals.
    """

    def __init__(self, folder: pathlib.Path, run_id: str, headline: Collection[str] = ()):
        self.folder = pathlib.Path(folder)
        self._run_id = run_id
        self._headline = headline
        self._files: dict[str, BinaryIO] = {}  # trial ("" for the run) -> its event file
        self._encoder = ScalarEventEncoder()
        self._failed = False

    def write(self, row: Mapping[str, Any], *, trial: str | None = None) -> None:
        if self._failed:
            return
        try:
            self._write(row, trial or "")
        except Exception as error:  # noqa: BLE001 - a view must never stop a run or cost it a row
            self._failed = True
            logging.warning(
                "TensorBoard events stop for this run (%s: %s); metrics.jsonl keeps every row; free the"
                " folder %s (or install tensorboard from the lock) for the next run",
                type(error).__name__,
                error,
                self.folder,
            )

    def _write(self, row: Mapping[str, Any], trial: str) -> None:
        step = row_step(row)
        scalars = row_scalars(row)
        if step is None or not scalars:
            return
        stream = self._file(trial)
        stream.write(tf_record(self._encoder.encode(wall_time=time.time(), step=step, scalars=scalars)))
        stream.flush()

    def _file(self, trial: str) -> BinaryIO:
        if trial not in self._files:
            from tensorboard.compat.proto import event_pb2

            folder = self.folder / trial if trial else self.folder
            folder.mkdir(parents=True, exist_ok=True)
            # TensorBoard reads a folder's files in name order: nanoseconds put a resumed run's after its parent's.
            stream = open(folder / f"events.out.tfevents.{time.time_ns():020d}.{self._run_id}", "ab")
            # The version record TensorBoard expects first: version 2 keeps out-of-order steps (no purge).
            version = event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")
            stream.write(tf_record(version.SerializeToString()))
            if self._headline:
                stream.write(tf_record(_layout_event(headline_layout(self._headline)).SerializeToString()))
            self._files[trial] = stream
        return self._files[trial]

    def close(self) -> None:
        for stream in self._files.values():
            try:
                stream.close()
            except OSError as error:  # the rows were flushed one by one; a failed close loses at most the last
                logging.warning("TensorBoard: closing %s failed: %s", stream.name, error)
        self._files.clear()
