"""Turns a `bazel test` log plus bazel-testlogs/ into the line `N passed, N failed`.

    python3 tools/ci/summarize_tests.py bazel-test.log bazel-testlogs

Counts individual test cases from each target's junit XML (pytest cases, or the
single case Bazel writes for other tests). A target that failed, timed out or
did not build counts its failing cases, and at least one.
"""

from __future__ import annotations

import pathlib
import re
import sys
from xml.etree import ElementTree

STATUS_LINE = re.compile(
    r"^(//\S+)\s+(?:\(cached\)\s+)?(FAILED TO BUILD|PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|SKIPPED)\b"
)


def target_statuses(log_text: str) -> dict[str, str]:
    statuses = {}
    for line in log_text.splitlines():
        match = STATUS_LINE.match(line.strip())
        if match:
            statuses[match.group(1)] = match.group(2)
    return statuses


def case_counts(xml_path: pathlib.Path) -> tuple[int, int, int]:
    """(passed, failed, skipped) test cases in one junit XML file."""
    passed = failed = skipped = 0
    for case in ElementTree.parse(xml_path).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def summarize(statuses: dict[str, str], testlogs: pathlib.Path) -> tuple[int, int, int]:
    passed = failed = skipped = 0
    for target, status in sorted(statuses.items()):
        package, _, name = target[2:].partition(":")
        xml_path = testlogs / package / name / "test.xml"
        counts = case_counts(xml_path) if xml_path.exists() else (0, 0, 0)
        if status in ("PASSED", "FLAKY"):
            passed += max(counts[0], 1)
            skipped += counts[2]
        elif status == "SKIPPED":
            continue
        else:
            passed += counts[0]
            failed += max(counts[1], 1)
    return passed, failed, skipped


def main(argv: list[str]) -> int:
    log_path, testlogs = pathlib.Path(argv[0]), pathlib.Path(argv[1])
    statuses = target_statuses(log_path.read_text(errors="replace"))
    passed, failed, skipped = summarize(statuses, testlogs)
    bad_targets = sorted(t for t, s in statuses.items() if s not in ("PASSED", "FLAKY", "SKIPPED"))
    print(f"bazel test targets: {len(statuses)} ({len(bad_targets)} not passing)")
    for target in bad_targets:
        print(f"  {statuses[target]}: {target}")
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed or not statuses else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
