"""Entry point of every rl_py_test: runs pytest on the files Bazel passes as arguments.

Results go to Bazel's junit XML; pytest's own lines land in bazel-testlogs/<pkg>/<name>/test.log.
"""

import os
import sys

import pytest


def main() -> int:
    args = [*sys.argv[1:], "-p", "no:cacheprovider", "-q", "-ra",
            # Tests that train or start Ray carry it (their Bazel targets are tagged `slow` too).
            "-o", "markers=slow: trains agents or starts Ray; minutes, not seconds"]
    xml_output = os.environ.get("XML_OUTPUT_FILE")
    if xml_output:
        args += ["--junitxml", xml_output]
    return pytest.main(args)


if __name__ == "__main__":
    sys.exit(main())
