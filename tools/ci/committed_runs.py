"""Caps what a committed run may hold: compact records only, no figures, no large file.

    python3 tools/ci/committed_runs.py            # exit 1, naming each file over the cap
    python3 tools/ci/committed_runs.py --root DIR

A committed run is a folder whose `run_manifest.json` git tracks (results/[smoke/]<run-id>/).
What it may hold is its records: the manifest, summary, probe reports and other JSON or text,
each at most MAX_FILE_BYTES, together at most MAX_RUN_BYTES. Figures (FIGURE_SUFFIXES) are made
from those numbers and live with the run's artifacts (`rl.harness.run.records.output_place`), so
every clone and rented instance downloads code and numbers, not pictures. A study's own folder
(results/studies/<id>/) is not a run. Standard library only.
"""

import argparse
import os
import subprocess
import sys

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = "run_manifest.json"
FIGURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf")  # as rl/harness/run/records.py
MAX_FILE_BYTES = 2 << 20  # a full run's probe_report.json is about 1 MiB
MAX_RUN_BYTES = 4 << 20


def problems(root: str) -> list[str]:
    """One line per committed-run file over the cap, and per run over its total."""
    listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True).stdout
    files = sorted(name for name in listed.decode().split("\0") if name)
    runs = {os.path.dirname(name) for name in files if os.path.basename(name) == MANIFEST}
    found, totals = [], {}
    for name in files:
        run = next((folder for folder in _parents(name) if folder in runs), None)
        if run is None:
            continue
        size = os.lstat(os.path.join(root, name)).st_size if os.path.lexists(os.path.join(root, name)) else 0
        totals[run] = totals.get(run, 0) + size
        if name.lower().endswith(FIGURE_SUFFIXES):
            found.append(
                f"{name}: a figure in a committed run; write it with the artifacts"
                " (context.write_output puts figures there) and `git rm --cached` it"
            )
        elif size > MAX_FILE_BYTES:
            found.append(
                f"{name}: {size} bytes, over {MAX_FILE_BYTES} for one file of a committed run;"
                " keep it with the artifacts"
            )
    found += [
        f"{run}/: {total} bytes, over {MAX_RUN_BYTES} for a committed run"
        for run, total in sorted(totals.items())
        if total > MAX_RUN_BYTES
    ]
    return found


def _parents(name: str):
    folder = os.path.dirname(name)
    while folder:
        yield folder
        folder = os.path.dirname(folder)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=_CHECKOUT, help="the checkout (default: the one holding this file)")
    options = parser.parse_args(argv)
    found = problems(options.root)
    for line in found:
        print(f"committed_runs: {line}", file=sys.stderr)
    print(f"committed_runs: {len(found)} file(s) over the cap of a committed run")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
