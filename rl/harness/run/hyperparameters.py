"""The hyperparameters a recipe lets `--set` change, typed by their defaults.

    # in a recipe
    HYPERPARAMETERS = Hyperparameters({"ppo/lr": 1e-3, "ppo/gamma": 0.9, "model/d_model": 32,
                                       "budget/env_steps": 2**20})

    def run(context):
        lr = context.hyperparameters["ppo/lr"]      # the default, or what --set ppo/lr=5e-4 gave

    rl-harness <recipe> --set ppo/lr=5e-4 --set model/d_model=64

Names are `<namespace>/<field>`. A value parses as its default's type: an int default takes whole
numbers only, a float default also takes them (5 -> 5.0), a bool takes true/false, a str anything.
An unknown name, a malformed assignment or a value of the wrong type is a UsageError (exit 2)
naming the valid keys and their types. A name whose field names a secret (`wandb/api_key`,
`db/password`) is refused: hyperparameters are recorded, and secrets come from the environment. The overrides are recorded in the manifest's options
(`set`), shown by `diff`, repeated by `reproduce`, and a study's `settings` axis passes them.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping

from rl.harness.errors import UsageError
from rl.harness.run import redaction

_NAME = re.compile(r"[a-z][a-z0-9_]*/[a-z][a-z0-9_]*")
_TYPES = (bool, int, float, str)


class Hyperparameters:
    """Declared overridable hyperparameters: name -> default (bool, int, float or str)."""

    def __init__(self, defaults: Mapping[str, Any]):
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

    def describe(self) -> str:
        """`ppo/lr (float), model/d_model (int)`: what an error message lists."""
        return ", ".join(f"{name} ({type(default).__name__})" for name, default in sorted(self.defaults.items()))

    def parse(self, assignments: Iterable[str]) -> dict[str, Any]:
        """{name: typed value} from `name=value` strings (the last of a repeated name wins); UsageError naming the fix."""
        overrides = {}
        for assignment in assignments:
            name, equals, text = assignment.partition("=")
            if not equals:
                raise UsageError(f"--set {assignment!r} is not key=value; valid keys: {self.describe()}")
            if name not in self.defaults:
                raise UsageError(f"--set {name}: unknown hyperparameter; valid keys: {self.describe()}")
            overrides[name] = _typed(name, text, type(self.defaults[name]), self)
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
        value = int(text) if kind is int else float(text)
    except ValueError:
        raise UsageError(problem) from None
    if kind is float and not math.isfinite(value):
        raise UsageError(problem)
    return value


def set_arguments(overrides: Mapping[str, Any]) -> list[str]:
    """`--set name=value ...` that give these overrides again (reproduce, a study's members)."""
    arguments = []
    for name, value in overrides.items():
        text = str(value).lower() if isinstance(value, bool) else value if isinstance(value, str) else repr(value)
        arguments += ["--set", f"{name}={text}"]
    return arguments
