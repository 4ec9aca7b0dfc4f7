"""Finds tracker issue numbers in the tracked text files of docs/, rl/, experiments/ and tools/.

    python3 tools/issue_numbers/check_issue_numbers.py [ROOT]   # exit 1 and one line per mention

Docs, code and tests state what is; an issue number is history (what asked for a change), and
the tracker's threads do not travel with the code. Say what the number stood for instead: the
target, the case, the reason. `find_mentions(root, paths)` and `tracked_text_files(root)` are
the library entry points (used by //tools/issue_numbers:issue_numbers_test).
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import subprocess
import sys

SCANNED_FOLDERS = ("docs", "rl", "experiments", "tools")
TEXT_SUFFIXES = frozenset({".py", ".md", ".bzl", ".bazel", ".sh", ".json", ".txt", ".cc"})
# The word issue or issues, any case, then a number, with or without spaces and '#' between them;
# not a word that ends in it (tissue) nor a link's issues/<number>. The tests show each form.
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\s*[0-9]+", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Mention:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: names an issue number ({self.text!r}); say what it stood for"


class NotAGitCheckout(RuntimeError):
    """The root has no git index to list tracked files from."""


def tracked_text_files(root: pathlib.Path) -> list[str]:
    """The tracked text files under SCANNED_FOLDERS, as paths relative to `root` (git's index)."""
    try:
        listing = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--", *SCANNED_FOLDERS],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", "") or str(error)
        raise NotAGitCheckout(
            f"cannot list the tracked files of {root} with git ({detail.strip()}); "
            "run the check in a git checkout with git on PATH"
        ) from error
    return [path for path in listing.split("\0") if path and _is_text(path)]


def _is_text(path: str) -> bool:
    return pathlib.PurePosixPath(path).suffix in TEXT_SUFFIXES


def find_mentions(root: pathlib.Path, paths: list[str]) -> list[Mention]:
    """Every issue number in the files `paths` (relative to `root`), in path and line order."""
    mentions = []
    for path in sorted(paths):
        text = (root / path).read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            mentions.extend(Mention(path, number, match.group(0)) for match in ISSUE_NUMBER.finditer(line))
    return mentions


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[0]) if argv else pathlib.Path(__file__).resolve().parents[2]
    try:
        mentions = find_mentions(root, tracked_text_files(root))
    except NotAGitCheckout as error:
        print(error, file=sys.stderr)
        return 2
    for mention in mentions:
        print(mention)
    return 1 if mentions else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
