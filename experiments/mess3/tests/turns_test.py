"""Processes at one table of turns work one at a time, in strict alternation, and go on when one leaves."""

import itertools
import multiprocessing
import os
import signal
import threading
import time

import pytest

from experiments.mess3.benchmarks import turns

SPAWN = multiprocessing.get_context("spawn")
WORK_S = 0.03


def _iterate(seat: turns.Seat, iterations: int, spans) -> None:
    """A part's loop: each iteration in its turn, its (seat, start, end) sent back; its waits last."""
    try:
        for _ in range(iterations):
            seat.take()
            started = time.time()
            deadline = time.perf_counter() + WORK_S
            while time.perf_counter() < deadline:  # busy, as a benchmark's iteration is
                pass
            spans.put((seat.index, started, time.time()))
    finally:
        seat.leave()
        spans.put((seat.index, "waits", seat.waits))


def _run(iterations: list[int]) -> tuple[list[tuple], dict]:
    table, spans = turns.Table(len(iterations), SPAWN), SPAWN.Queue()
    processes = [
        SPAWN.Process(target=_iterate, args=(table.seat(index), count, spans)) for index, count in enumerate(iterations)
    ]
    for process in processes:
        process.start()
    messages = [spans.get(timeout=60) for _ in range(sum(iterations) + len(iterations))]
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0
    waits = {index: value for index, kind, value in messages if kind == "waits"}
    return sorted(message for message in messages if message[1] != "waits"), waits


def test_two_processes_alternate_and_never_overlap():
    spans, waits = _run([6, 6])
    by_start = sorted(spans, key=lambda span: span[1])
    assert [index for index, _, _ in by_start] == [0, 1] * 6
    for (_, _, earlier_end), (_, later_start, _) in itertools.pairwise(by_start):
        assert later_start >= earlier_end
    # Seat 1 waits out each of seat 0's iterations: at least five of them after its first.
    assert sum(end - start for start, end in waits[1]) >= 5 * WORK_S


def test_a_seat_that_leaves_early_does_not_hold_up_the_others():
    spans, _ = _run([2, 7])
    by_start = sorted(spans, key=lambda span: span[1])
    assert [index for index, _, _ in by_start] == [0, 1, 0, 1, 1, 1, 1, 1, 1]


def _wait_for_a_turn(seat: turns.Seat, waiting) -> None:
    waiting.set()
    seat.take()  # seat 0 holds the turn: this waits until the process is killed


def test_a_process_killed_while_it_waits_holds_up_no_other():
    table = turns.Table(2, SPAWN)
    holder = table.seat(0)
    holder.take()
    waiting = SPAWN.Event()
    waiter = SPAWN.Process(target=_wait_for_a_turn, args=(table.seat(1), waiting))
    waiter.start()
    assert waiting.wait(timeout=60)
    time.sleep(0.5)  # into its wait for the turn
    os.kill(waiter.pid, signal.SIGKILL)
    waiter.join(timeout=30)
    table.seat(1).leave()  # as bench_throughput does for a part whose process died
    went_on = threading.Event()

    def next_turn() -> None:
        holder.take(timeout_s=5)  # hands the turn on, finds no one else, takes it again
        went_on.set()

    thread = threading.Thread(target=next_turn, daemon=True)
    thread.start()
    thread.join(timeout=15)
    assert went_on.is_set()


def test_waited_within_counts_the_waits_that_end_between_two_stamps():
    seat = turns.Table(1, SPAWN).seat(0)
    seat.waits = [(1.0, 2.0), (3.0, 3.5), (5.0, 7.0)]
    assert seat.waited_within(2.0, 7.0) == pytest.approx(2.5)  # the first ended at the first stamp: before it
    assert seat.waited_within(0.0, 10.0) == pytest.approx(3.5)


def test_a_turn_never_passed_on_ends_in_one_line_naming_the_way_out():
    table = turns.Table(2, SPAWN)
    holder, waiter = table.seat(0), table.seat(1)
    holder.take()
    with pytest.raises(TimeoutError, match="seat 1 waited 0 s for its turn: .* without leaving; look at seat 0"):
        waiter.take(timeout_s=0.2, hint="look at seat 0")
    holder.leave()
    waiter.take(timeout_s=1.0)  # its turn now


def test_a_seat_outside_the_table_is_refused():
    with pytest.raises(ValueError, match="seat 2 is not at a table of 2"):
        turns.Table(2, SPAWN).seat(2)
