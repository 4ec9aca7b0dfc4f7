"""Git in the tests' throwaway repositories, as a fixed test author.

head = repos.git("rev-parse", "HEAD", cwd=folder)
"""

import subprocess


def git(*args, cwd) -> str:
    """`git <args>` in `cwd` (raises on failure); its stdout, stripped."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
