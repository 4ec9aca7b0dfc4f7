"""The hyperparameters a recipe lets `--set` change, typed by their defaults.

    # in a recipe
    HYPERPARAMETERS = Hyperparameters({"ppo/lr": 1e-3, "ppo/gamma": 0.9, "model/d_model": 32,
                                       "budget/env_steps": 2**20},
                                      ranges={"ppo/lr": Range.positive(), "ppo/gamma": Range(0, 1),
                                              "model/d_model": Range(1), "budget/env_steps": Range(1)})

    def run(context):
        lr = context.hyperparameters["ppo/lr"]      # the default, or what --set ppo/lr=5e-4 gave

    rl-harness <recipe> --set ppo/lr=5e-4 --set model/d_model=64

Names are `<namespace>/<field>`. A value parses as its default's type: an int default takes whole
numbers only, a float default also takes them (5 -> 5.0), a bool takes true/false, a str anything.
Every number declares the values it may take (`Range`: a learning rate > 0, a discount in [0, 1]),
and its default lies inside. An unknown name, a malformed assignment, a value of the wrong type, a
non-finite number (nan, inf) or one out of its range is a UsageError (exit 2) naming the valid keys
and their types, or the range. A name whose field names a
secret (`wandb/api_key`, `db/password`) is refused: hyperparameters are recorded, and secrets come
from the environment. Rules that tie values together (a Transformer's d_model divisible by its
n_heads) are the recipe's `check`: it sees every value (defaults with the overrides) and raises
ValueError naming the `--set` to type; `parse` turns that into a UsageError too, so a bad
combination stops before any record exists or Ray starts:

    HYPERPARAMETERS = Hyperparameters({...}, check=task.check_transformer_hyperparameters)

The overrides are recorded in the manifest's options (`set`), shown by `diff`, repeated by
`reproduce`, and a study's `hyperparameters` axis passes them, one setting per member.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rl.harness.errors import UsageError
from rl.harness.run import redaction

_NAME = re.compile(r"[a-z][a-z0-9_]*/[a-z][a-z0-9_]*")
_TYPES = (bool, int, float, str)


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a numeric hyperparameter may take: `low <= value <= high`, a side open with `low_open` /
    `high_open`, unbounded where None.

        Range(0, 1)            # a discount: in [0, 1]
        Range.positive()       # a learning rate: > 0
        Range(1)               # a count: >= 1
        Range()                # any finite number (say why in a comment)
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    @classmethod
    def positive(cls) -> Range:
        return cls(0, None, low_open=True)

    def __contains__(self, value: float) -> bool:
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below

    def describe(self) -> str:
        """`> 0`, `>= 1`, `<= 1`, `in [0, 1]`, `in (0, 1]` or `any number`."""
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        return "any number"


class Hyperparameters:
    """Declared overridable hyperparameters: name -> default (bool, int, float or str), each number with its `Range`."""

    def __init__(
        self,
        defaults: Mapping[str, Any],
        check: Callable[[Mapping[str, Any]], None] | None = None,
        ranges: Mapping[str, Range] | None = None,
    ):
        ranges = dict(ranges or {})
        for name, default in defaults.items():
            if not _NAME.fullmatch(name):
                raise ValueError(f"hyperparameter name {name!r} must be <namespace>/<field> in lower case, e.g. ppo/lr")
            if redaction.credential_name(name):
                raise ValueError(
                    f"hyperparameter {name} names a credential, and hyperparameters are recorded in the"
                    " manifest, shown by diff and uploaded; read secrets from the environment instead"
                    " (docs/harness.md, Trust)"
                )
            if type(default) not in _TYPES:
                raise ValueError(
                    f"hyperparameter {name} has a default of type {type(default).__name__}; use bool, int, float or str"
                )
            numeric = type(default) in (int, float)
            if numeric and name not in ranges:
                raise ValueError(
                    f"hyperparameter {name} ({type(default).__name__}) declares no range; pass"
                    f" ranges={{{name!r}: Range(...)}}, e.g. Range.positive() or Range(0, 1)"
                )
            if numeric and default not in ranges[name]:
                raise ValueError(
                    f"hyperparameter {name}'s default {default!r} is outside its range ({ranges[name].describe()})"
                )
        if stray := sorted(name for name in ranges if name in defaults and type(defaults[name]) not in (int, float)):
            raise ValueError(f"ranges of {', '.join(stray)}: a range belongs to an int or float hyperparameter")
        self.defaults = dict(defaults)
        self.ranges = {name: ranges[name] for name in defaults if name in ranges}  # a shared table may name more
        self.check = check

    def describe(self) -> str:
        """`ppo/lr (float), model/d_model (int)`: what an error message lists."""
        return ", ".join(f"{name} ({type(default).__name__})" for name, default in sorted(self.defaults.items()))

    def parse(self, assignments: Iterable[str]) -> dict[str, Any]:
        """{name: typed value} from `name=value` strings (the last of a repeated name wins); UsageError naming the fix."""
        assignments = list(assignments)
        overrides = {}
        for assignment in assignments:
            name, equals, text = assignment.partition("=")
            if not equals:
                raise UsageError(f"--set {assignment!r} is not key=value; valid keys: {self.describe()}")
            if name not in self.defaults:
                raise UsageError(f"--set {name}: unknown hyperparameter; valid keys: {self.describe()}")
            overrides[name] = value = _typed(name, text, type(self.defaults[name]), self)
            if name in self.ranges and value not in self.ranges[name]:
                raise UsageError(
                    f"--set {name}={text}: out of range; {name} must be {self.ranges[name].describe()}"
                    f" (default {self.defaults[name]!r})"
                )
        if self.check is not None:
            try:
                self.check(self.values(overrides))
            except ValueError as error:
                given = f"--set {' --set '.join(assignments)}" if assignments else "the recipe's defaults"
                raise UsageError(f"{given}: {error}") from None
        return overrides

    def values(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.defaults, **overrides}


def _typed(name: str, text: str, kind: type, declared: Hyperparameters) -> Any:
    problem = f"--set {name}={text}: expected {kind.__name__}; valid keys: {declared.describe()}"
    if kind is str:
        return text
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise UsageError(problem)
        return text.lower() == "true"
    try:
        number = float(text)
    except ValueError:
        raise UsageError(problem) from None
    if not math.isfinite(number):
        raise UsageError(
            f"--set {name}={text}: not a finite number; give a finite {kind.__name__}, e.g. the default"
            f" {name}={declared.defaults[name]!r}"
        )
    try:
        return int(text) if kind is int else number
    except ValueError:
        raise UsageError(problem) from None


def set_arguments(overrides: Mapping[str, Any]) -> list[str]:
    """`--set name=value ...` that give these overrides again (reproduce, a study's members)."""
    arguments = []
    for name, value in overrides.items():
        text = str(value).lower() if isinstance(value, bool) else value if isinstance(value, str) else repr(value)
        arguments += ["--set", f"{name}={text}"]
    return arguments
