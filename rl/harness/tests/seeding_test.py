import hashlib

import numpy as np
import pytest

from rl.harness.run import seeding


def _documented_integer(root, name):
    """docs/seeding.md: SeedSequence(root, spawn_key=sha256(name) as 8 little-endian uint32), first word mod 2**31."""
    digest = hashlib.sha256(name.encode()).digest()
    key = tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 32, 4))
    return int(np.random.SeedSequence(root, spawn_key=key).generate_state(1, dtype=np.uint32)[0]) % 2**31


def test_integer_seeds_follow_the_documented_derivation():
    seeds = seeding.SeedStreams(42)
    assert seeds.integer("rllib") == _documented_integer(42, "rllib")
    assert seeds.integer("env/eval") == _documented_integer(42, "env/eval")
    assert seeds.root == 42


def test_streams_do_not_depend_on_the_order_they_are_drawn_in():
    first, second = seeding.SeedStreams(7), seeding.SeedStreams(7)
    a_then_b = (first.integer("a"), first.integer("b"))
    b_then_a = (second.integer("b"), second.integer("a"))
    assert a_then_b == b_then_a[::-1]


def test_a_stream_is_never_handed_out_twice():
    seeds = seeding.SeedStreams(42)
    seeds.generator("probe_split")
    with pytest.raises(seeding.SeedStreamError, match="already used"):
        seeds.integer("probe_split")


def test_names_and_roots_give_different_streams():
    assert seeding.SeedStreams(1).integer("x") != seeding.SeedStreams(2).integer("x")
    seeds = seeding.SeedStreams(1)
    assert seeds.integer("x") != seeds.integer("y")
    values = seeds.integers("tune/trials", 5)
    assert len(set(values)) == 5 and all(0 <= value < 2**31 for value in values)


def test_generators_are_reproducible():
    draw = lambda: seeding.SeedStreams(3).generator("noise").standard_normal(4)
    np.testing.assert_array_equal(draw(), draw())


def test_issued_streams_are_recorded():
    seeds = seeding.SeedStreams(42)
    value = seeds.integer("rllib")
    seeds.generator("noise")
    issued = seeds.issued()
    assert issued["rllib"]["value"] == value and issued["noise"]["kind"] == "generator"
    assert issued["rllib"]["spawn_key"] == list(seeding.spawn_key("rllib"))


@pytest.mark.parametrize("root", [-1, 1.5, "42", True])
def test_bad_roots_are_refused(root):
    with pytest.raises(seeding.SeedStreamError, match="--seed"):
        seeding.SeedStreams(root)
