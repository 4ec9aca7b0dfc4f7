"""Cassandra's .POMDP format: machine.POMDP (shared notes, section 1) and every form of entry, plus errors."""

import dataclasses
import pathlib

import numpy as np
import pytest

from rl.envs.pomdp import PomdpFormatError, load_pomdp

TESTDATA = pathlib.Path(__file__).resolve().parent.parent / "testdata"
MACHINE = TESTDATA / "machine.POMDP"

TIGER = """\
# Kaelbling, Littman and Cassandra's tiger problem, with names and matrix forms
discount: 0.95
values: reward
states: tiger-left tiger-right
actions: listen open-left open-right
observations: hear-left hear-right
start: uniform
T: listen
identity
T: open-left
uniform
T: open-right
uniform
O: listen
0.85 0.15
0.15 0.85
O: open-left
uniform
O: open-right
uniform
R: listen : * : * : * -1
R: open-left : tiger-left : * : * -100
R: open-left : tiger-right : * : * 10
R: open-right : tiger-left : * : * 10
R: open-right : tiger-right : * : * -100
"""


def test_machine_file():
    pomdp = load_pomdp(MACHINE)
    assert (pomdp.num_states, pomdp.num_actions, pomdp.num_observations) == (256, 4, 16)
    assert pomdp.discount == 0.999
    assert pomdp.state_names is None and pomdp.action_names is None and pomdp.observation_names is None
    np.testing.assert_array_equal(pomdp.start, np.eye(256)[255])
    # entries quoted from the file
    assert pomdp.transitions[0, 255, 255] == 0.885293 and pomdp.transitions[0, 255, 170] == 0.000001
    assert pomdp.transitions[0, 5, 0] == 0.0009 and pomdp.transitions[0, 5, 2] == 0.0  # unspecified: zero
    assert pomdp.transitions[3, 2, 255] == 1.0 and pomdp.transitions[1, 2, 2] == 1.0
    assert pomdp.observations[1, 170, 0] == 0.0016 and pomdp.observations[0, 255, 15] == 1.0
    assert pomdp.rewards[0, 255, 17, 3] == 0.994013  # R: 0 : 255 : * : * 0.994013
    # expected rewards weight R by rows that sum to one only within the file's rounding
    assert pomdp.expected_rewards[0, 85] == pytest.approx(0.280112, abs=1e-5) and pomdp.expected_rewards[0, 0] == 0.0
    np.testing.assert_allclose(pomdp.expected_rewards[1:, 7], [-1.0, -3.0, -15.0], rtol=1e-5)
    assert load_pomdp(str(MACHINE)).transitions[0, 255, 255] == 0.885293  # a path given as a string


def test_names_matrices_uniform_identity_and_wildcards():
    pomdp = load_pomdp(TIGER)
    assert pomdp.state_names == ("tiger-left", "tiger-right")
    assert pomdp.action_names == ("listen", "open-left", "open-right")
    assert pomdp.observation_names == ("hear-left", "hear-right")
    np.testing.assert_array_equal(pomdp.start, [0.5, 0.5])
    np.testing.assert_array_equal(pomdp.transitions[0], np.eye(2))
    np.testing.assert_array_equal(pomdp.transitions[1:], 0.5)
    np.testing.assert_array_equal(pomdp.observations[0], [[0.85, 0.15], [0.15, 0.85]])
    np.testing.assert_array_equal(pomdp.observations[1:], 0.5)
    np.testing.assert_array_equal(pomdp.expected_rewards, [[-1, -1], [-100, 10], [10, -100]])


def _header(start=""):
    """Five preamble lines, then the start line if any: entries begin on line 6 or 7."""
    preamble = "discount: 0.9\nvalues: reward\nstates: 3\nactions: a b\nobservations: 2\n"
    return preamble + (f"{start}\n" if start else "")


def test_single_entries_rows_overrides_and_reward_forms():
    text = _header("start: 0.2 0.3 0.5") + (
        "T: * : * : * 0.0\n"  # everything zero, then rows and entries override
        "T: a : 0\n0.1 0.2 0.7\n"
        "T: a : 1 : 1 1.0\n"
        "T: a : 2\nuniform\n"
        "T: b\n1 0 0\n0 1 0\n0 0 1\n"
        "T: b : 2 : 2 0.4   # overriding one entry of the matrix ...\n"
        "T: b : 2 : 0 0.6   # ... and keeping the row stochastic\n"
        "O: * : * : 0 0.25\nO: * : * : 1 0.75\n"
        "O: b : 1\n1.0 0.0\n"
        "R: a : 0 : 1\n5 7\n"  # a row over observations
        "R: b : 2\n1 2\n3 4\n5 6\n"  # a matrix over (end state, observation)
        "R: * : 1 : * : 1 -2.5\n"
    )
    pomdp = load_pomdp(text)
    np.testing.assert_array_equal(pomdp.start, [0.2, 0.3, 0.5])
    np.testing.assert_allclose(pomdp.transitions[0], [[0.1, 0.2, 0.7], [0, 1, 0], [1 / 3] * 3])
    np.testing.assert_array_equal(pomdp.transitions[1], [[1, 0, 0], [0, 1, 0], [0.6, 0, 0.4]])
    np.testing.assert_array_equal(pomdp.observations[0], [[0.25, 0.75]] * 3)
    np.testing.assert_array_equal(pomdp.observations[1], [[0.25, 0.75], [1, 0], [0.25, 0.75]])
    np.testing.assert_array_equal(pomdp.rewards[0, 0, 1], [5, 7])
    np.testing.assert_array_equal(pomdp.rewards[1, 2], [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(pomdp.rewards[:, 1, :, 1], -2.5)
    assert pomdp.rewards[0, 1, 0, 0] == 0.0


@pytest.mark.parametrize(
    "start, expected",
    [
        ("", [1 / 3] * 3),  # no start: uniform, as in pomdp-solve
        ("start: uniform", [1 / 3] * 3),
        ("start include: 0 2", [0.5, 0, 0.5]),
        ("start exclude: 1", [0.5, 0, 0.5]),
        ("start: 0 0 1.0", [0, 0, 1]),
    ],
)
def test_start_forms(start, expected):
    pomdp = load_pomdp(_header(start) + "T: * identity\nO: * uniform\n")
    np.testing.assert_allclose(pomdp.start, expected)


def test_start_by_name_and_costs():
    text = "discount: 0.5\nvalues: cost\nstates: low high\nactions: 1\nobservations: 1\nstart: high\n"
    text += "T: 0 identity\nO: 0 uniform\nR: 0 : high : * : * 4.0\n"
    pomdp = load_pomdp(text)
    np.testing.assert_array_equal(pomdp.start, [0, 1])
    np.testing.assert_array_equal(pomdp.expected_rewards, [[0.0, -4.0]])  # costs are negated


@pytest.mark.parametrize(
    "body, message",
    [
        ("T: a : 0 : 1", r"<text>:6: file ends where a transition probability was expected"),
        ("T: a : 0 : 5 1.0", r"<text>:6: state 5 is out of range: the file declares 3 states"),
        ("T: c : 0 : 1 1.0", r"<text>:6: 'c' is not one of the declared actions"),
        ("T: a : 0 : 1 1.5", r"<text>:6: a transition probability is 1.5; probabilities must lie in \[0, 1\]"),
        ("T: a : 0\n0.5 0.5 x", r"<text>:7: expected a T row \(entry 3 of 3\) \(a number\), found 'x'"),
        ("O: a identity", r"<text>:6: 'identity' is only valid for a whole T matrix"),
        ("T: a : 0 reset", r"<text>:6: 'reset' is a pomdp-solve extension"),
        ("R: a 1 2 3", r"<text>:6: expected ':' after the action of an R entry"),
        ("S: a", r"<text>:6: expected a 'T:', 'O:' or 'R:' entry, found 'S'"),
    ],
)
def test_malformed_input_names_line_and_expectation(body, message):
    with pytest.raises(PomdpFormatError, match=message):
        load_pomdp(_header() + body + "\n")


def test_rows_not_summing_to_one_are_format_errors_at_their_line():
    text = _header() + "T: * identity\nO: * uniform\nT: b : 1\n0.5 0.2 0.2\n"
    with pytest.raises(
        PomdpFormatError, match=r"^<text>:8: T: row 'T: 1 : 1' \(action 1, state 1; last set on line 8\) sums to 0.9"
    ):
        load_pomdp(text)
    # a row never set is reported at the end of the file (line 6 here)
    with pytest.raises(PomdpFormatError, match=r"^<text>:6: O: row 'O: 0 : 0' \(action 0, end state 0; never set\)"):
        load_pomdp(_header() + "T: * identity\n")
    with pytest.raises(PomdpFormatError, match=r"^<text>:6: start: row \(the vector on line 6\) sums to 0.9"):
        load_pomdp(_header("start: 0.3 0.3 0.3") + "T: * identity\nO: * uniform\n")


def test_a_sign_may_stand_apart_from_its_number():
    text = (
        _header("start: + 0.2 0.3 0.5") + "T: * identity\nO: * uniform\nR: a : 0 : * : * - 1.5\nR: b : * : * : * -2\n"
    )
    pomdp = load_pomdp(text)
    np.testing.assert_array_equal(pomdp.start, [0.2, 0.3, 0.5])
    np.testing.assert_array_equal(pomdp.expected_rewards, [[-1.5, 0, 0], [-2, -2, -2]])
    with pytest.raises(PomdpFormatError, match=r"<text>:8: expected a reward \(a number\), found '-x'"):
        load_pomdp(_header() + "T: * identity\nO: * uniform\nR: a : 0 : * : * - x\n")


def test_a_file_without_observations_is_an_mdp_observing_its_state():
    text = "discount: 0.9\nvalues: cost\nstates: low high\nactions: stay\nT: stay identity\nR: stay : high : * : * 2\n"
    pomdp = load_pomdp(text)
    assert pomdp.observation_names == ("low", "high")
    np.testing.assert_array_equal(pomdp.observations[0], np.eye(2))
    np.testing.assert_array_equal(pomdp.expected_rewards, [[0.0, -2.0]])
    with pytest.raises(PomdpFormatError, match=r"<text>:5: an 'O:' entry in a file without 'observations:'"):
        load_pomdp("discount: 0.9\nvalues: reward\nstates: 2\nactions: 1\nO: 0 uniform\n")


@pytest.mark.parametrize(
    "entries, table_shape",
    [
        ("R: * : * : * : * 1\nR: a : 1 : * : * 2\n", (2, 3, 1, 1)),  # (action, state) only
        ("R: * : * : 2 : * 1\n", (2, 3, 3, 1)),  # the end state matters (Hallway)
        ("R: a : 0 : 1\n5 7\n", (2, 3, 3, 2)),  # a row over observations names an end state
        ("R: a : * : * : 1 3\n", (2, 3, 1, 2)),  # an observation only
    ],
)
def test_rewards_keep_only_the_axes_the_entries_distinguish(entries, table_shape):
    pomdp = load_pomdp(_header() + "T: * identity\nO: * uniform\n" + entries)
    assert pomdp.reward_table.shape == table_shape
    assert pomdp.rewards.shape == (2, 3, 3, 2)


def test_reference_files_entries():
    """Entries quoted from the classic files (../shared/reference/pomdp/, copied to testdata/)."""
    tag = load_pomdp(TESTDATA / "TagAvoid.pomdp")
    assert (tag.num_states, tag.num_actions, tag.num_observations) == (870, 5, 30)
    assert tag.reward_table.shape == (5, 870, 1, 1)  # not a 5 x 870 x 870 x 30 array (900 MB)
    north, catch, yes = 0, 4, 29
    assert tag.transitions[north, 0, 300] == 0.6 and tag.transitions[north, 0, 0] == 0.0  # line 883; 882 overrides 11
    assert tag.observations[north, 0, yes] == 1.0 and tag.start[0] == 0.00118906
    assert tag.expected_rewards[catch, 0] == 10.0 and tag.expected_rewards[catch, 1] == -10.0  # R: Catch : s0, default
    assert tag.expected_rewards[catch, 29] == 0.0 and tag.expected_rewards[north, 5] == -1.0
    rediscounted = dataclasses.replace(tag, discount=0.9)  # `rewards` is a broadcast view: it stays compact
    assert rediscounted.reward_table.shape == (5, 870, 1, 1) and rediscounted.rewards[catch, 0, 7, 3] == 10.0
    hallway = load_pomdp(TESTDATA / "Hallway.pomdp")
    assert (hallway.num_states, hallway.num_actions, hallway.num_observations) == (60, 5, 21)
    assert hallway.reward_table.shape == (5, 60, 60, 1)  # R: * : * : 56 : * 1.000000 (the goal, entered)
    assert hallway.rewards[2, 13, 56, 7] == 1.0 and hallway.rewards[2, 13, 55, 7] == 0.0
    tiger = load_pomdp(TESTDATA / "tiger.95.POMDP")
    np.testing.assert_array_equal(tiger.expected_rewards, [[-1, -1], [-100, 10], [10, -100]])
    assert tiger.discount == 0.95


def test_preamble_errors():
    with pytest.raises(PomdpFormatError, match=r"lacks \['values'\]"):
        load_pomdp("discount: 0.9\nstates: 2\nactions: 1\nobservations: 1\nT: 0 identity\n")
    with pytest.raises(PomdpFormatError, match="'states' is declared twice"):
        load_pomdp("discount: 0.9\nstates: 2\nstates: 3\n")
    with pytest.raises(PomdpFormatError, match="values must be 'reward' or 'cost'"):
        load_pomdp("discount: 0.9\nvalues: utility\n")
    with pytest.raises(PomdpFormatError, match="'2x' cannot be a name"):
        load_pomdp("discount: 0.9\nvalues: reward\nstates: s1 2x\n")
