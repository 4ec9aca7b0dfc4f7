"""TensorBoard events beside metrics.jsonl, read back with TensorBoard's own reader and checked against the rows."""

import io
import math

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import SCALARS, TENSORS, EventAccumulator
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow
from tensorboard.summary.writer.record_writer import RecordWriter

from rl.harness.commands import tensorboard_view
from rl.harness.errors import EXIT_USAGE
from rl.harness.run import records, tensorboard_events
from rl.harness.run.layout import RunLayout
from rl.harness.tests import contexts, run_helpers

ROWS = [
    {
        "training_iteration": 1,
        "num_env_steps_sampled_lifetime": 4000,
        "time_this_iter_s": 1.25,
        "env_runners": {"episode_return_mean": None, "num_episodes": 0},
        "learners": {"default_policy": {"loss": 0.5}},
    },
    {
        "training_iteration": 2,
        "num_env_steps_sampled_lifetime": 8000,
        "time_this_iter_s": 1.5,
        "env_runners": {"episode_return_mean": 21.5, "num_episodes": 3},
        "learners": {"default_policy": {"loss": 0.25}},
        "done": False,
        "note": "text is no curve",
        "odd": math.nan,
    },
]


def _scalars(folder) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] as TensorBoard reads the folder."""
    accumulator = EventAccumulator(str(folder), size_guidance={SCALARS: 0})
    accumulator.Reload()
    return {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]
    }


def _expected(rows: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """Every number of every metrics.jsonl row at its env steps, as float32 (what an event keeps)."""
    curves = {}
    for row in rows:
        for key, value in row.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                curves.setdefault(key, []).append((row["num_env_steps_sampled_lifetime"], float(np.float32(value))))
    return curves


def test_every_number_of_every_row_is_a_scalar_at_its_env_steps(tmp_path):
    context, recorder = contexts.recorded_context(tmp_path, root_seed=0)
    for row in ROWS:
        recorder.log_metrics(row)
    recorder.finish("completed")
    rows = context.metrics()
    folder = context.artifacts_dir / tensorboard_events.EVENTS_DIR
    assert _scalars(folder) == _expected(rows)
    assert _scalars(folder)["env_runners/episode_return_mean"] == [(8000, 21.5)]  # null and NaN draw no point
    assert recorder.manifest.paths[tensorboard_events.MANIFEST_PATH_KEY] == str(folder)


def test_events_are_readable_while_the_run_trains(tmp_path):
    context, recorder = contexts.recorded_context(tmp_path, root_seed=0)
    recorder.log_metrics(ROWS[0])
    live = _scalars(context.artifacts_dir / tensorboard_events.EVENTS_DIR)
    recorder.finish("completed")
    assert live["learners/default_policy/loss"] == [(4000, 0.5)]


def test_each_trial_gets_its_own_folder(tmp_path):
    context, recorder = contexts.recorded_context(tmp_path, root_seed=0)
    for trial in ("PPO_a_00000", "PPO_a_00001"):
        recorder.log_metrics({**ROWS[0], "trial_id": trial}, trial=trial)
    recorder.finish("completed")
    folder = context.artifacts_dir / tensorboard_events.EVENTS_DIR
    assert sorted(path.name for path in folder.iterdir()) == ["PPO_a_00000", "PPO_a_00001"]
    assert _scalars(folder / "PPO_a_00001")["time_this_iter_s"] == [(4000, 1.25)]


def test_rows_without_env_steps_are_drawn_at_their_iteration():
    assert tensorboard_events.row_step({"training_iteration": 3, "harness/row": 7}) == 3
    assert tensorboard_events.row_step({"harness/row": 7}) == 7


def test_a_failing_events_write_loses_no_metrics_row(tmp_path, monkeypatch):
    context, recorder = contexts.recorded_context(tmp_path, root_seed=0)
    warnings = []
    monkeypatch.setattr(tensorboard_events.logging, "warning", lambda *args: warnings.append(args))
    (context.artifacts_dir / tensorboard_events.EVENTS_DIR).write_text("a file where the events folder goes")
    for row in ROWS:
        recorder.log_metrics(row)
    recorder.finish("completed")
    assert [row["training_iteration"] for row in context.metrics()] == [1, 2]
    assert len(warnings) == 1 and "metrics.jsonl keeps every row" in warnings[0][0]


def test_a_resumed_run_continues_its_parents_curves_in_the_same_folder(tmp_path, monkeypatch):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"

    def run(*args):
        return run_helpers.run_fake(results, artifacts, *args)

    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "3")
    assert run("--run-id", "parent") == 0
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "5")
    assert run("--run-id", "child", "--resume-from", "parent") == 0
    assert run("--run-id", "grandchild", "--resume-from", "child") == 0  # nothing left to train: no rows
    folder = artifacts / "parent" / tensorboard_events.EVENTS_DIR
    for run_id in ("child", "grandchild"):
        assert run_helpers.manifest(results / run_id)["paths"]["tensorboard"] == str(folder)
    rows = [
        row
        for run_id in ("parent", "child")
        for row in records.read_json_lines(str(artifacts / run_id / records.METRICS_FILE))
    ]
    assert _scalars(folder)["fake/loss"] == _expected(rows)["fake/loss"]
    assert [step for step, _ in _scalars(folder)["fake/loss"]] == [100, 200, 300, 400, 500]
    assert not (artifacts / "child" / tensorboard_events.EVENTS_DIR).exists()
    # //tools:tensorboard shows the lineage once, named after its first run
    assert tensorboard_view.events_folders(results) == {f"{run_helpers.FAKE}/parent": folder}
    tree = tmp_path / "tree"
    tensorboard_view.link_tree(tensorboard_view.events_folders(results), tree)
    assert _scalars(tree / run_helpers.FAKE / "parent") == _scalars(folder)


def test_a_run_resumed_from_an_earlier_checkpoint_draws_no_step_twice(tmp_path, monkeypatch):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"

    def run(*args):
        return run_helpers.run_fake(results, artifacts, *args)

    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "5")  # checkpoints at 2, 4 and 5; rows 1-5
    assert run("--run-id", "parent") == 0
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "7")
    earlier = artifacts / "parent" / "checkpoints" / "iter_000002"  # as if it crashed after row 5
    assert run("--run-id", "child", "--resume-from", str(earlier)) == 0
    folder = artifacts / "parent" / tensorboard_events.EVENTS_DIR
    steps = [step for step, _ in _scalars(folder)["fake/loss"]]
    assert steps == [100, 200, 300, 400, 500, 600, 700]  # the parent's 300-500 were redone, and drawn once
    redone = records.read_json_lines(str(artifacts / "child" / records.METRICS_FILE))
    assert _scalars(folder)["fake/loss"][2:] == _expected(redone)["fake/loss"]
    assert len(records.read_json_lines(str(artifacts / "parent" / records.METRICS_FILE))) == 5  # the record keeps all


def test_the_viewer_accepts_an_artifacts_tree_and_one_runs_artifacts(tmp_path, monkeypatch):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    monkeypatch.setenv("FAKE_RECIPE_ITERATIONS", "2")
    for run_id, *smoke in (("full",), ("tiny", "--smoke")):
        assert run_helpers.run_fake(results, artifacts, "--run-id", run_id, *smoke) == 0
    events = {"full": artifacts / "full" / "tensorboard", "smoke/tiny": artifacts / "smoke" / "tiny" / "tensorboard"}
    assert tensorboard_view.events_folders(artifacts) == {}  # no manifests there
    assert tensorboard_view.events_folders_below(artifacts) == events
    assert tensorboard_view.events_folders_below(artifacts / "full") == {"full": events["full"]}
    assert tensorboard_view.events_folders_below(events["full"]) == {"full": events["full"]}
    served = []
    monkeypatch.setattr("tensorboard.program.TensorBoard.main", lambda board: served.append(board) or 0)
    assert tensorboard_view.main(["tensorboard", str(artifacts), "--port", "0"]) == 0
    assert len(served) == 1


def _headline_charts(folder) -> list[tuple[str, list[str]]]:
    """(title, tag regexes) of each chart in the folder's custom-scalars layout, read as TensorBoard's plugin does."""
    from tensorboard.plugins.custom_scalar import layout_pb2, metadata

    accumulator = EventAccumulator(str(folder), size_guidance={TENSORS: 0})
    accumulator.Reload()
    tensor = accumulator.Tensors(metadata.CONFIG_SUMMARY_TAG)[0].tensor_proto
    layout = layout_pb2.Layout.FromString(tensor.string_val[0])
    assert [category.title for category in layout.category] == ["headline"]
    return [(chart.title, list(chart.multiline.tag)) for chart in layout.category[0].chart]


def test_the_summarised_metrics_are_the_headline_charts_return_first(tmp_path):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    assert run_helpers.run_fake(results, artifacts, "--run-id", "r") == 0
    charts = _headline_charts(artifacts / "r" / tensorboard_events.EVENTS_DIR)
    assert charts == [
        ("env_runners/episode_return_mean", [r"^env_runners/episode_return_mean$"]),
        ("env_runners/episode_len_mean", [r"^env_runners/episode_len_mean$"]),
        ("fake/loss", [r"^fake/loss$"]),  # the recipe's own summarize("fake/loss")
        ("time_this_iter_s", [r"^time_this_iter_s$"]),
    ]


@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_the_viewer_refuses_a_folder_without_events_in_one_line(tmp_path, capsys, folder):
    (tmp_path / "empty").mkdir()
    assert tensorboard_view.main(["tensorboard", str(tmp_path / folder), "--port", "0"]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("tensorboard: error: ")


@pytest.mark.parametrize(
    "parent_run", [None, {"parent_run_id": None, "checkpoint": "/elsewhere/iter_000001"}, {"parent_run_id": "not-here"}]
)
def test_a_run_without_a_parent_found_here_starts_its_own_curves(tmp_path, parent_run):
    layout = RunLayout(tmp_path / "results", tmp_path / "artifacts", "run", smoke=False)
    assert tensorboard_events.lineage_folder(layout, parent_run) == layout.artifacts_dir / "tensorboard"


def test_the_crc32c_check_value():
    # CRC-32C's published check value, masked as TFRecord's spec does (rotate right 15, add 0xA282EAD8).
    crc = 0xE3069283
    assert tensorboard_events.masked_crc32c(b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert tensorboard_events.masked_crc32c(b"") == 0xA282EAD8


@pytest.mark.parametrize("length", [*range(40), 255, 256, 257, 511, 512, 513, 5000, 20_000])
def test_records_are_framed_and_checksummed_as_tensorboards_writer_does(length):
    data = np.random.default_rng(length).integers(0, 256, length, dtype=np.uint8).tobytes()
    assert tensorboard_events.masked_crc32c(data) == pywrap_tensorflow.masked_crc32c(data)
    written = io.BytesIO()
    RecordWriter(written).write(data)
    assert tensorboard_events.tf_record(data) == written.getvalue()


@pytest.mark.parametrize("seed", range(5))
def test_the_event_encoder_writes_what_protobuf_serializes(seed):
    from tensorboard.compat.proto import event_pb2, summary_pb2

    rng = np.random.default_rng(seed)
    tags = [f"group_{i % 7}/metric_{i}" + "é" * (i % 3) for i in range(int(rng.integers(1, 150)))]
    values = [*rng.normal(0, 10.0 ** rng.integers(-40, 40, 40)), 0.0, -0.0, 1e39, -1e39, 3.4028235e38, 1e-46, 7]
    scalars = {tag: float(values[i % len(values)]) for i, tag in enumerate(tags)}
    encoder = tensorboard_events.ScalarEventEncoder()
    for step, wall_time in [(0, 0.0), (1, 1.0), (127, 5.5), (128, 0.0), (2048, 1.7e9), (1 << 40, 1e9), (-1, 2.0)]:
        expected = event_pb2.Event(
            wall_time=wall_time,
            step=step,
            summary=summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in sorted(scalars.items())]
            ),
        )
        assert encoder.encode(wall_time=wall_time, step=step, scalars=scalars) == expected.SerializeToString()
