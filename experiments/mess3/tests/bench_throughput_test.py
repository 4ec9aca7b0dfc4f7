"""bench_throughput --interleave: a part that fails leaves the turns, so the others finish before its error is raised."""

import multiprocessing
import time

import pytest

from experiments.mess3.benchmarks import bench_throughput


def test_a_part_that_fails_before_its_first_turn_does_not_hold_up_the_other():
    started = time.monotonic()
    with pytest.raises(KeyError, match="no_such_part"):
        # The failing part holds the first turn: the plain loop can only run once it has left.
        bench_throughput._interleaved(
            multiprocessing.get_context("spawn"), ["no_such_part", "torch_reference"], (5, 1, {}, "cpu")
        )
    assert time.monotonic() - started < 120  # far below the turns' timeout (turns.TURN_TIMEOUT_S)


def test_interleave_refuses_the_pipelined_part():
    with pytest.raises(SystemExit):
        bench_throughput.main(["--interleave", "--parts", "harness_pipelined", "torch_reference"])
