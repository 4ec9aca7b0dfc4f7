"""A check that a secret leaked nowhere: in output, error messages, or files.

from rl.devops.vast.testing.leaks import assert_no_secret

assert_no_secret(api_key, captured_output, caught_error, state_dir / "state.json")
"""

from __future__ import annotations

import os


def assert_no_secret(secret: str, *places: object) -> None:
    """Asserts `secret` occurs in none of `places` (text, exceptions, or paths whose content is read)."""
    for place in places:
        content = open(place).read() if isinstance(place, os.PathLike) else str(place)
        assert secret not in content, f"the secret leaked into: {content[:300]!r}"
