"""What a starting run records about itself: its provenance, gathered from plain values.

    from rl.harness.run import begin

    document = begin.new_manifest(source_file=module.__file__, module_name="experiments.mess3.reward_only",
                                  command_line=argv, seed=7, options=vars(options), layout=layout,
                                  hardware={"profile": profile.as_dict(), "machine": machine.as_dict()},
                                  platform=numeric_platform.gather(), resume=None)
    patches = begin.capture_patches(document.code, cap_bytes)   # {"uncommitted.patch": b"..."}

The record format is `run/manifest.py`'s; the facts (git state, versions) come from `run/provenance.py`.
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from absl import logging

from rl.harness import env_vars
from rl.harness.run import buildinfo, provenance, records, redaction
from rl.harness.run.layout import RunLayout
from rl.harness.run.manifest import ExperimentRecord, ResumeSource, RunManifest
from rl.harness.run.platform import NumericPlatform

# Resolve the file, not its folder: under `bazel run` the folder is a real directory
# of the runfiles tree (outside any checkout) holding symlinks into the source tree.
_HARNESS_DIR = os.path.dirname(os.path.realpath(__file__))


def recorded_options(options: Mapping[str, Any]) -> dict:
    """The run's options as the manifest keeps them (paths as strings; the module and private keys left out).

    Text values, `--set` values included, are redacted (`redaction`): a secret passed on the command line
    does not reach the record.
    """

    def recorded(value):
        if isinstance(value, pathlib.Path):
            return str(value)
        if isinstance(value, str):
            return redaction.redact(value)
        if isinstance(value, Mapping):
            return {key: recorded(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [recorded(item) for item in value]
        return value

    return {
        key: recorded(value) for key, value in sorted(options.items()) if key != "module" and not key.startswith("_")
    }


def code_state(source: str, build: Mapping[str, Any]) -> dict:
    """The git state of the repository holding `source` (an experiment or a study) and of the library.

    `source` is resolved first: under `bazel run` a module's file is a runfiles link in a real folder
    inside the execroot, whose `.git` link makes git take the execroot (every file a symlink, build
    outputs untracked) for a dirty checkout.
    """
    return {
        "experiment_repo": provenance.git_state(os.path.realpath(source)),
        "library": {
            **provenance.git_state(_HARNESS_DIR),
            "build_stamp_commit": build.get("git_commit"),
            "pinned": build.get("library"),
        },
    }


def new_manifest(
    *,
    source_file: str,
    module_name: str,
    command_line: Sequence[str],
    seed: int,
    options: Mapping[str, Any],
    layout: RunLayout,
    hardware: Mapping[str, Any],
    platform: NumericPlatform | None,
    resume: ResumeSource | None,
) -> RunManifest:
    """The manifest of a run about to start: its provenance, before the recipe runs (status `running` once started).

    `source_file` is the recipe's file, `command_line` the words the user typed, `options` the run's
    options by name and `hardware` the profile and the machine (`{"profile": ..., "machine": ...}`).
    """
    source = os.path.realpath(source_file)
    build = buildinfo.current().as_dict()
    code = code_state(source, build)
    experiment_repo = code["experiment_repo"]
    if options.get("allow_untracked_code") and experiment_repo["commit"] is None:  # --allow-untracked-code
        experiment_repo["untracked_sources"] = provenance.untracked_sources(os.path.dirname(source))
    return RunManifest(
        run_id=layout.run_id,
        status=None,
        experiment=ExperimentRecord(
            module=module_name,
            # relative to its repository, so committed records carry no machine's paths
            source_file=os.path.relpath(source, experiment_repo["root"]) if experiment_repo["root"] else source,
            source_sha256=provenance.file_sha256(source),
        ),
        code=code,
        build=build,
        versions=provenance.package_versions(),
        command_line=redaction.redact_all(command_line),
        process_command_line=redaction.redact_all(getattr(sys, "orig_argv", sys.argv)),
        seed=seed,
        options=recorded_options(options),
        paths={"results": str(layout.results_dir), "artifacts": str(layout.artifacts_dir)},
        hardware=dict(hardware),
        platform=platform,
        parent_run=resume.as_dict() if resume else None,
    )


def capture_patches(code: dict, cap_bytes: int) -> dict[str, bytes]:
    """The patch of each dirty repository (one file when experiment and library share a checkout).

    Records it in the repo's manifest entry (`patch`: file, bytes, the untracked files it adds, those
    left out over the cap) and logs the untracked files it takes. Warns when untracked files were left
    out over the cap (the run then cannot be rebuilt exactly) and for each untracked file refused as
    credential-shaped (provenance.refusal; in every repository, dirty or not).
    """
    patches, by_root, warned = {}, {}, set()
    for name, state in code.items():
        refused = {**(state.get("refused_untracked") or {}), **(state.get("refused_tracked") or {})}
        for path, why in refused.items():
            if (state["root"], path) not in warned:
                warned.add((state["root"], path))
                logging.warning(
                    "left %s out of the run's records (patch and code hash): %s; keep secrets outside"
                    " the checkout or git-ignore them (docs/harness.md, Trust)",
                    os.path.join(state["root"], path),
                    why,
                )
        if not state.get("dirty"):
            continue
        if state["root"] not in by_root:
            file_name = records.PATCH_FILE if not by_root else f"uncommitted_{name}.patch"
            change = provenance.uncommitted_change(state["root"], cap_bytes)
            if change.untracked:
                logging.info(
                    "the run's patch %s adds %d untracked file(s) of %s: %s",
                    file_name,
                    len(change.untracked),
                    state["root"],
                    ", ".join(change.untracked),
                )
            if change.omitted:
                logging.warning(
                    "the run's patch leaves out %d untracked file(s) over $%s=%d bytes (%s):"
                    " `rl-harness reproduce` cannot rebuild this checkout exactly; commit them,"
                    " git-ignore them or raise the cap",
                    len(change.omitted),
                    env_vars.PATCH_CAP_ENV,
                    cap_bytes,
                    ", ".join(change.omitted[:5]),
                )
            patches[file_name] = change.patch
            by_root[state["root"]] = {
                "file": file_name,
                "bytes": len(change.patch),
                "untracked": change.untracked,
                "omitted": change.omitted,
            }
        state["patch"] = by_root[state["root"]]
    return patches
