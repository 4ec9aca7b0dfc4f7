"""The hyperparameters a recipe lets `--set` change, typed by their defaults.

    # in a recipe
    HYPERPARAMETERS = Hyperparameters({"ppo/lr": 1e-3, "ppo/gamma": 0.9, "model/d_model": 32,
                                       "budget/env_steps": 2**20})

    def run(context):
        lr = context.hyperparameters["ppo/lr"]      # the default, or what --set ppo/lr=5e-4 gave

    rl-harness <recipe> --set ppo/lr=5e-4 --set model/d_model=64

Names are `<namespace>/<field>`. A value parses as its default's type: an int default takes whole
numbers only, a float default also takes them (5 -> 5.0), a bool takes true/false, a str anything.
An unknown name, a malformed assignment, a value of the wrong type or a non-finite number (nan,
inf) is a UsageError (exit 2) naming the valid keys and their types. A name whose field names a
secret (`wandb/api_key`, `db/password`) is refused: hyperparameters are recorded, and secrets come
from the environment. Rules that tie values together (a Transformer's d_model divisible by its
n_heads) are the recipe's `check`: it sees every value (defaults with the overrides) and raises
ValueError naming the `--set` to type; `parse` turns that into a UsageError too, so a bad
combination stops before any record exists or Ray starts:

    HYPERPARAMETERS = Hyperparameters({...}, check=task.check_transformer_hyperparameters)

The overrides are recorded in the manifest's options (`set`), shown by `diff`, repeated by
`reproduce`, and a study's `settings` axis passes them.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Iterable, Mapping, Optional

from rl.harness.errors import UsageError
from rl.harness.run import redaction

_NAME = re.compile(r"[a-z][a-z0-9_]*/[a-z][a-z0-9_]*")
_TYPES = (bool, int, float, str)


class Hyperparameters:
    """Declared overridable hyperparameters: name -> default (bool, int, float or str)."""

    def __init__(self, defaults: Mapping[str, Any], check: Optional[Callable[[Mapping[str, Any]], None]] = None):
        for name, default in defaults.items():
            if not _NAME.fullmatch(name):
                raise ValueError(f"hyperparameter name {name!r} must be <namespace>/<field> in lower case, e.g. ppo/lr")
            if redaction.credential_name(name):
                raise ValueError(f"hyperparameter {name} names a credential, and hyperparameters are recorded in the"
                                 " manifest, shown by diff and uploaded; read secrets from the environment instead"
                                 " (docs/harness.md, Trust)")
            if type(default) not in _TYPES:
                raise ValueError(f"hyperparameter {name} has a default of type {type(default).__name__};"
                                 " use bool, int, float or str")
        self.defaults = dict(defaults)
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
            overrides[name] = _typed(name, text, type(self.defaults[name]), self)
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
        raise UsageError(f"--set {name}={text}: not a finite number; give a finite {kind.__name__}, e.g. the default"
                         f" {name}={declared.defaults[name]!r}")
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
