"""The provenance part of a run's manifest, written before the recipe runs, and the dirty checkout's patch.

    document = manifest.base_manifest(module=module, module_name="experiments.mess3.reward_only",
                                      options=options, layout=layout, profile=profile, machine=machine,
                                      resume=None)
    patches = manifest.capture_patches(document["code"], cap_bytes)   # {"uncommitted.patch": b"..."}

The session adds status, heartbeat, runner and checkpoints to it (session.RunSession).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from typing import Optional

from absl import logging

from rl.harness import settings
from rl.harness.run import buildinfo, provenance, records

from rl.harness.training import hardware
from rl.harness.run.context import ResumeSource
from rl.harness.run.layout import RunLayout

# Resolve the file, not its folder: under `bazel run` the folder is a real directory
# of the runfiles tree (outside any checkout) holding symlinks into the source tree.
_HARNESS_DIR = os.path.dirname(os.path.realpath(__file__))


def recorded_options(options: argparse.Namespace) -> dict:
    """The run's options as the manifest keeps them (paths as strings; the module and private keys left out)."""
    return {key: (str(value) if isinstance(value, pathlib.Path) else value)
            for key, value in sorted(vars(options).items()) if key != "module" and not key.startswith("_")}


def base_manifest(*, module, module_name: str, options: argparse.Namespace, layout: RunLayout,
                  profile: hardware.HardwareProfile, machine: hardware.MachineFacts,
                  resume: Optional[ResumeSource]) -> dict:
    source = os.path.realpath(module.__file__)
    experiment_repo = provenance.git_state(source)
    build = buildinfo.current().as_dict()
    return {
        "experiment": {"module": module_name,
                       # relative to its repository, so committed records carry no machine's paths
                       "source_file": (os.path.relpath(source, experiment_repo["root"])
                                       if experiment_repo["root"] else source),
                       "source_sha256": provenance.file_sha256(source)},
        "code": {"experiment_repo": experiment_repo,
                 "library": {**provenance.git_state(_HARNESS_DIR),
                             "build_stamp_commit": build.get("git_commit"),
                             "pinned": build.get("library")}},
        "build": build,
        "versions": provenance.package_versions(),
        "command_line": options._argv,
        "process_command_line": list(getattr(sys, "orig_argv", sys.argv)),
        "seed": options.seed,
        "options": recorded_options(options),
        "paths": {"results": str(layout.results_dir), "artifacts": str(layout.artifacts_dir)},
        "hardware": {"profile": profile.as_dict(), "machine": machine.as_dict()},
        "parent_run": resume.as_dict() if resume else None,
        "runner": None,
        "cluster": None,  # the Ray cluster, recorded by the runners once connected (rl.harness.training.cluster.describe)
        "remote": None,
    }


def capture_patches(code: dict, cap_bytes: int) -> dict[str, bytes]:
    """The patch of each dirty repository (one file when experiment and library share a checkout).

    Records it in the repo's manifest entry (`patch`: file, bytes, omitted files) and warns when
    untracked files were left out, since the run then cannot be rebuilt exactly.
    """
    patches, by_root = {}, {}
    for name, state in code.items():
        if not state.get("dirty"):
            continue
        if state["root"] not in by_root:
            file_name = records.PATCH_FILE if not by_root else f"uncommitted_{name}.patch"
            change = provenance.uncommitted_change(state["root"], cap_bytes)
            if change.omitted:
                logging.warning("the run's patch leaves out %d untracked file(s) over $%s=%d bytes (%s):"
                                " `rl-harness reproduce` cannot rebuild this checkout exactly; commit them,"
                                " git-ignore them or raise the cap", len(change.omitted), settings.PATCH_CAP_ENV,
                                cap_bytes, ", ".join(change.omitted[:5]))
            patches[file_name] = change.patch
            by_root[state["root"]] = {"file": file_name, "bytes": len(change.patch), "omitted": change.omitted}
        state["patch"] = by_root[state["root"]]
    return patches


def json_safe(value):
    """`value` if JSON can hold it, else its repr (a recipe's outcome is recorded either way)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)
