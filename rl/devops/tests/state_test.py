"""The state file: no lost update under concurrent writers, atomic writes, quarantine expiry."""

import dataclasses
import json
import multiprocessing
import os

import pytest

from rl.devops.vast import redact, state

WRITERS = 6
RECORDS_PER_WRITER = 15


def _record(label: str, **fields) -> state.Record:
    return state.Record(
        label=label,
        launch_id="t",
        target="//experiments/x:y",
        seed=0,
        run_id="r-" + label,
        sink="copy",
        dest="/tmp/d",
        remote_out="/workspace/rlh/out",
        **fields,
    )


def _writer(directory: str, writer: int) -> None:
    store = state.StateFile(directory, lock_timeout_s=30)
    for index in range(RECORDS_PER_WRITER):
        with store.update() as current:
            label = f"w{writer}-{index}"
            current.records[label] = _record(label)
            counter = current.records.get("counter") or _record("counter", attempts=0)
            current.records["counter"] = dataclasses.replace(counter, attempts=counter.attempts + 1)


def test_concurrent_writer_processes_lose_no_update(tmp_path):
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_writer, args=(str(tmp_path), w)) for w in range(WRITERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    current = state.StateFile(tmp_path).read()
    assert len(current.records) == WRITERS * RECORDS_PER_WRITER + 1
    assert current.records["counter"].attempts == WRITERS * RECORDS_PER_WRITER  # every increment survived
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] == []  # no temp file left behind


def test_a_failed_update_writes_nothing(tmp_path):
    store = state.StateFile(tmp_path)
    with store.update() as current:
        current.records["a"] = _record("a")
    with pytest.raises(RuntimeError), store.update() as current:
        current.records["b"] = _record("b")
        raise RuntimeError("boom")
    assert list(store.read().records) == ["a"]


def test_set_replaces_fields_and_redacts_the_note(tmp_path):
    redact.register_secret("key-0123456789")
    store = state.StateFile(tmp_path)
    with store.update() as current:
        current.records["a"] = _record("a")
    record = store.set("a", status=state.KEPT, note="copy failed: key-0123456789")
    assert record.status == state.KEPT and "key-0123456789" not in store.path.read_text()


def test_the_lock_wait_is_bounded_and_names_the_fix(tmp_path):
    holder = state.StateFile(tmp_path)
    waiter = state.StateFile(tmp_path, lock_timeout_s=0.2)
    with holder.update(), pytest.raises(redact.DevopsError, match="wait for it to finish"), waiter.update():
        pass


def test_quarantine_expires(tmp_path):
    store = state.StateFile(tmp_path)
    with store.update() as current:
        current.quarantine_machine(7, "never booted", hours=1, now=1000.0)
        current.quarantine_machine(8, "CUDA errors", hours=2, now=1000.0)
    current = store.read()
    assert current.quarantined(now=1000.0 + 1800) == {7: "never booted", 8: "CUDA errors"}
    assert current.quarantined(now=1000.0 + 3601) == {8: "CUDA errors"}
    with store.update() as current:  # a later entry drops the expired ones
        current.quarantine_machine(9, "slow disk", hours=1, now=1000.0 + 3 * 3600)
    assert sorted(store.read().quarantine) == [9]


def test_spend_is_price_times_billed_hours():
    record = _record("a", dph_total=0.5, created_at=0.0)
    assert record.spend(now=7200.0) == pytest.approx(1.0)
    assert dataclasses.replace(record, ended_at=3600.0).spend(now=7200.0) == pytest.approx(0.5)


def test_a_corrupt_state_file_names_the_fix(tmp_path):
    (tmp_path / state.STATE_FILE).write_text("{not json")
    with pytest.raises(redact.DevopsError, match="move it aside and run `reap`"):
        state.StateFile(tmp_path).read()
    (tmp_path / state.STATE_FILE).write_text(json.dumps({"schema": 99}))
    with pytest.raises(redact.DevopsError, match="expected 1"):
        state.StateFile(tmp_path).read()
