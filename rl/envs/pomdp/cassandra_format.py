"""Reads Cassandra's .POMDP file format (pomdp-solve, pomdp.org) into a FinitePOMDP.

    pomdp = load_pomdp("rl/envs/testdata/machine.POMDP")
    pomdp = load_pomdp(text)      # a string holding the file itself also works

Covered: the preamble (`discount`, `values: reward|cost`, `states/actions/observations` as a
count or a list of names, in any order); `start` as a vector, `uniform`, a state name,
`start include: ...` or `start exclude: ...` (uniform over the listed / the other states;
without `start` the belief is uniform, as in pomdp-solve); `T`, `O` and `R` entries as single
entries, rows, full matrices, `uniform`, `identity` (T matrices only) and `*` wildcards, where
later entries override earlier ones and unspecified entries are zero. Elements are referred to
by name or by number; a number's sign may stand apart from it (`- 1`), as pomdp-solve's grammar
allows. Comments run from `#` to the end of the line. A file without `observations:` is an MDP
(as in pomdp-solve): its state is observed, so the model gets one observation per state
(O[a, s2, o] = 1 exactly when o = s2, named as the states are), and `O:` entries are rejected.

Rewards are stored with only the axes the file's entries distinguish (FinitePOMDP.reward_table):
a file whose R entries all have `*` for the end state and observation gives (actions, states,
1, 1) rewards, so TagAvoid (870 states, 30 observations) is read in well under a second instead
of filling an actions x states^2 x observations array.

`values: cost` files are negated, so FinitePOMDP rewards are always to be maximised. The
pomdp-solve extension `reset` is rejected (write the row out instead). Errors are
PomdpFormatError, starting `source:line:`, and say what was expected; T and O rows and the
start vector must sum to one within rl.envs.stochastic.ROW_SUM_TOLERANCE (a row's error names
the line that last set it). A discount of 1 is read as given; the solvers refuse it.
"""

from __future__ import annotations

import os
import pathlib
import re

import numpy as np

from rl.envs import stochastic
from rl.envs.pomdp.model import FinitePOMDP

_TOKEN = re.compile(r":|[^\s:]+")
_PREAMBLE = ("discount", "values", "states", "actions", "observations")
_RESERVED = frozenset(
    {*_PREAMBLE, "start", "T", "O", "R", "uniform", "identity", "reset", "include", "exclude", "reward", "cost"}
)
_ALL = slice(None)  # what a `*` reference selects
_SIGNS = ("-", "+")


class PomdpFormatError(ValueError):
    """A .POMDP file that does not follow the format; the message starts with `source:line:`."""


def load_pomdp(path_or_text: str | os.PathLike) -> FinitePOMDP:
    """Parses a .POMDP file (a path, or the file's text when it contains a newline or a colon)."""
    if isinstance(path_or_text, os.PathLike) or ("\n" not in path_or_text and ":" not in path_or_text):
        path = pathlib.Path(path_or_text)
        return _Parser(path.read_text(), source=str(path)).parse()
    return _Parser(path_or_text, source="<text>").parse()


class _Parser:
    def __init__(self, text: str, source: str):
        self._source = source
        self._tokens: list[str] = []
        self._lines: list[int] = []
        for number, line in enumerate(text.splitlines(), start=1):
            for token in _TOKEN.findall(line.split("#", 1)[0]):
                self._tokens.append(token)
                self._lines.append(number)
        self._position = 0
        self._last_line = len(text.splitlines()) or 1

    # -- token stream --------------------------------------------------------------------------

    def _peek(self, ahead: int = 0) -> str | None:
        index = self._position + ahead
        return self._tokens[index] if index < len(self._tokens) else None

    def _line(self, previous: bool = False) -> int:
        position = self._position - previous
        return self._lines[position] if position < len(self._tokens) else self._last_line

    def _error(self, message: str, *, previous: bool = False) -> PomdpFormatError:
        """An error located at the next token, or at the one just read (`previous`)."""
        return PomdpFormatError(f"{self._source}:{self._line(previous)}: {message}")

    def _next(self, expected: str) -> str:
        token = self._peek()
        if token is None:
            raise self._error(f"file ends where {expected} was expected")
        self._position += 1
        return token

    def _expect(self, token: str, context: str) -> None:
        found = self._peek()
        if found != token:
            raise self._error(f"expected '{token}' {context}, found {found!r}")
        self._position += 1

    def _at_section(self) -> bool:
        """True at the start of a preamble item, `start` or a T/O/R entry."""
        token, after = self._peek(), self._peek(1)
        return (token in (*_PREAMBLE, "T", "O", "R") and after == ":") or (
            token == "start" and after in (":", "include", "exclude")
        )

    def _number(self, what: str, *, probability: bool) -> float:
        token = self._next(what)
        if token in _SIGNS:  # `- 1`: pomdp-solve's grammar lets a sign stand apart from its number
            token += self._next(f"the number after '{token}' in {what}")
        try:
            value = float(token)
        except ValueError:
            raise self._error(f"expected {what} (a number), found {token!r}", previous=True) from None
        if probability and not 0.0 <= value <= 1.0:
            raise self._error(f"{what} is {token}; probabilities must lie in [0, 1]", previous=True)
        return value

    def _numbers(self, count: int, what: str, *, probability: bool) -> np.ndarray:
        return np.array(
            [self._number(f"{what} (entry {i + 1} of {count})", probability=probability) for i in range(count)]
        )

    # -- preamble ------------------------------------------------------------------------------

    def parse(self) -> FinitePOMDP:
        header: dict[str, object] = {}
        while self._peek() in _PREAMBLE and self._peek(1) == ":":
            key = self._next("a preamble item")
            if key in header:
                raise self._error(f"'{key}' is declared twice; keep one declaration")
            self._position += 1  # the colon
            header[key] = self._preamble_value(key)
        # without observations the file is an MDP: each state is its own observation
        is_mdp = "observations" not in header
        if is_mdp and "states" in header:
            header["observations"] = header["states"]
        missing = [key for key in _PREAMBLE if key not in header]
        if missing:
            raise self._error(
                f"the preamble lacks {missing}; a .POMDP file starts with discount, values, states, actions and "
                "observations (in any order) before start and T/O/R entries"
            )
        kinds = ("states", "actions", "observations")
        # declared by count (an int) or by names (a list); numbers refer to positions either way
        self._names = {kind: None if isinstance(header[kind], int) else tuple(header[kind]) for kind in kinds}
        self._counts = {kind: header[kind] if isinstance(header[kind], int) else len(header[kind]) for kind in kinds}
        num_states, num_actions, num_observations = (self._counts[kind] for kind in kinds)
        start = self._start() if self._peek() == "start" else np.full(num_states, 1.0 / num_states)
        self._transitions = np.zeros((num_actions, num_states, num_states))
        self._observations = np.zeros((num_actions, num_states, num_observations))
        self._reward_entries: list[tuple[tuple[int | slice, ...], np.ndarray | float]] = []
        self._transition_lines = np.zeros((num_actions, num_states), dtype=int)
        self._observation_lines = np.zeros((num_actions, num_states), dtype=int)
        while self._peek() is not None:
            kind = self._peek()
            if kind not in ("T", "O", "R") or self._peek(1) != ":":
                raise self._error(f"expected a 'T:', 'O:' or 'R:' entry, found {kind!r}")
            if kind == "O" and is_mdp:
                raise self._error("an 'O:' entry in a file without 'observations:' (an MDP, whose state is observed)")
            self._position += 2
            {"T": self._transition_entry, "O": self._observation_entry, "R": self._reward_entry}[kind]()
        if is_mdp:
            self._observations[:] = np.eye(num_states)
        self._require_rows(self._transitions, self._transition_lines, "T", "state")
        self._require_rows(self._observations, self._observation_lines, "O", "end state")
        sign = -1.0 if header["values"] == "cost" else 1.0
        return FinitePOMDP(
            transitions=self._transitions,
            observations=self._observations,
            rewards=sign * self._reward_table(),
            start=start,
            discount=header["discount"],
            state_names=self._names["states"],
            action_names=self._names["actions"],
            observation_names=self._names["observations"],
        )

    def _preamble_value(self, key: str):
        if key == "discount":
            return self._number("the discount", probability=True)
        if key == "values":
            value = self._next("'reward' or 'cost'")
            if value not in ("reward", "cost"):
                raise self._error(f"values must be 'reward' or 'cost', found {value!r}", previous=True)
            return value
        first = self._peek()
        if first is not None and first.isdigit():
            self._position += 1
            if int(first) < 1:
                raise self._error(f"{key}: {first}; declare at least one", previous=True)
            return int(first)
        names = []
        while self._peek() is not None and not self._at_section():
            name = self._next("a name")
            if name[0].isdigit() or name in _RESERVED or name == "*":
                raise self._error(
                    f"{key}: {name!r} cannot be a name (names start with a letter and are not keywords)", previous=True
                )
            if name in names:
                raise self._error(f"{key}: {name!r} is listed twice; names must be distinct", previous=True)
            names.append(name)
        if not names:
            raise self._error(f"{key}: expected a count or a list of names")
        return names

    # -- references and start ------------------------------------------------------------------

    def _reference(self, kind: str) -> int | slice:
        """A state/action/observation: a number, a declared name, or `*` (all of them)."""
        token = self._next(f"a reference to one of the {kind}")
        if token == "*":
            return _ALL
        count = self._counts[kind]
        if token.isdigit():
            if int(token) >= count:
                raise self._error(
                    f"{kind[:-1]} {token} is out of range: the file declares {count} {kind}", previous=True
                )
            return int(token)
        names = self._names[kind]
        if names is not None and token in names:
            return names.index(token)
        raise self._error(f"{token!r} is not one of the declared {kind}", previous=True)

    def _start(self) -> np.ndarray:
        line = self._line()
        self._position += 1
        num_states = self._counts["states"]
        mode = self._next("':', 'include' or 'exclude'")
        if mode in ("include", "exclude"):
            self._expect(":", f"after 'start {mode}'")
            chosen = np.zeros(num_states, dtype=bool)
            while self._peek() is not None and not self._at_section():
                chosen[self._reference("states")] = True
            if mode == "exclude":
                chosen = ~chosen
            if not chosen.any():
                raise self._error(f"'start {mode}' leaves no state to start in")
            return chosen / chosen.sum()
        token = self._peek()
        if token == "uniform":
            self._position += 1
            return np.full(num_states, 1.0 / num_states)
        if token == "reset":
            raise self._error("'reset' is a pomdp-solve extension this reader does not support; write the vector out")
        if token is not None and not _is_number(token) and token not in _SIGNS:
            start = np.zeros(num_states)
            start[self._reference("states")] = 1.0
            return start
        start = self._numbers(num_states, "a start probability", probability=True)
        if abs(start.sum() - 1.0) > stochastic.ROW_SUM_TOLERANCE:
            raise PomdpFormatError(
                f"{self._source}:{line}: start: row (the vector on line {line}) sums to {start.sum():.9g}; it must sum "
                f"to 1 (within {stochastic.ROW_SUM_TOLERANCE:g})"
            )
        return start

    # -- T, O and R entries --------------------------------------------------------------------

    def _matrix(self, shape: tuple[int, ...], what: str, *, identity_allowed: bool) -> np.ndarray:
        """A row or matrix body: `uniform`, `identity` (square T matrices) or the numbers themselves."""
        token = self._peek()
        if token == "uniform":
            self._position += 1
            return np.full(shape, 1.0 / shape[-1])
        if token == "identity":
            if not identity_allowed:
                raise self._error(f"'identity' is only valid for a whole T matrix, not for {what}")
            self._position += 1
            return np.eye(shape[0])
        if token == "reset":
            raise self._error("'reset' is a pomdp-solve extension this reader does not support; write the row out")
        return self._numbers(int(np.prod(shape)), what, probability=True).reshape(shape)

    def _transition_entry(self) -> None:
        """T: a : s : s2 p | T: a : s row | T: a matrix."""
        self._probability_entry(self._transitions, self._transition_lines, "T", "states", "a transition probability")

    def _observation_entry(self) -> None:
        """O: a : s2 : o p | O: a : s2 row | O: a matrix."""
        self._probability_entry(
            self._observations, self._observation_lines, "O", "observations", "an observation probability"
        )

    def _probability_entry(self, array, lines, kind: str, last: str, probability: str) -> None:
        line = self._line()
        action = self._reference("actions")
        if self._peek() != ":":
            array[action] = self._matrix(array.shape[1:], f"a {kind} matrix", identity_allowed=kind == "T")
            lines[action] = line
            return
        self._position += 1
        state = self._reference("states")
        if self._peek() == ":":
            self._position += 1
            column = self._reference(last)  # read before the number: the file's order
            array[action, state, column] = self._number(probability, probability=True)
        else:
            array[action, state] = self._matrix(array.shape[2:], f"a {kind} row", identity_allowed=False)
        lines[action, state] = line

    def _reward_entry(self) -> None:
        """R: a : s : s2 : o r | R: a : s : s2 row-over-o | R: a : s matrix-over-(s2, o); recorded in order."""
        action = self._reference("actions")
        self._expect(":", "after the action of an R entry (R: action : start-state ...)")
        state = self._reference("states")
        num_states, num_observations = self._counts["states"], self._counts["observations"]
        if self._peek() != ":":
            matrix = self._numbers(num_states * num_observations, "an R matrix entry", probability=False)
            self._reward_entries.append(((action, state, _ALL, _ALL), matrix.reshape(num_states, num_observations)))
            return
        self._position += 1
        end_state = self._reference("states")
        if self._peek() != ":":
            row = self._numbers(num_observations, "an R row entry", probability=False)
            self._reward_entries.append(((action, state, end_state, _ALL), row))
            return
        self._position += 1
        observation = self._reference("observations")
        self._reward_entries.append(
            ((action, state, end_state, observation), self._number("a reward", probability=False))
        )

    def _reward_table(self) -> np.ndarray:
        """The R entries applied in order to an array with size 1 along every axis no entry distinguishes.

        An axis is kept when some entry names one of its elements or gives values along it (rows,
        matrices); otherwise every entry covers it whole, so the dense rewards are constant along it.
        """
        shape = [self._counts["actions"], self._counts["states"], self._counts["states"], self._counts["observations"]]
        for axis in (2, 3):
            if not any(_distinguishes(index, values, axis) for index, values in self._reward_entries):
                shape[axis] = 1
        table = np.zeros(shape)
        for index, values in self._reward_entries:
            table[index] = values
        return table

    def _require_rows(self, array: np.ndarray, lines: np.ndarray, kind: str, row_kind: str) -> None:
        """PomdpFormatError at the line that last set the first row of T or O not summing to one."""
        sums = array.sum(axis=2)
        bad = np.argwhere(np.abs(sums - 1.0) > stochastic.ROW_SUM_TOLERANCE)
        if not bad.size:
            return
        action, state = (int(i) for i in bad[0])
        line = lines[action, state]
        where = f"last set on line {line}" if line else "never set"
        raise PomdpFormatError(
            f"{self._source}:{line or self._last_line}: {kind}: row '{kind}: {action} : {state}' (action {action}, "
            f"{row_kind} {state}; {where}) sums to {sums[action, state]:.9g}; each row must sum to 1 "
            f"(within {stochastic.ROW_SUM_TOLERANCE:g}); {len(bad)} row(s) are off"
        )


def _distinguishes(index: tuple[int | slice, ...], values, axis: int) -> bool:
    """Whether an R entry (its index and values) can make the rewards vary along `axis` (2 or 3)."""
    varying_axes = {0: (), 1: (3,), 2: (2, 3)}[np.ndim(values)]  # a row varies along o, a matrix along (s2, o)
    return not isinstance(index[axis], slice) or axis in varying_axes


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True
