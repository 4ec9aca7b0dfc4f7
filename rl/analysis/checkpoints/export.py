"""Export an RLModule as a portable module that loads with torch alone (see rl.analysis.portable).

    from rl.analysis.checkpoints import export_portable_module, load_rl_module

    module = load_rl_module(checkpoint.path)
    export_portable_module(module, "artifacts/<run-id>/portable/iter_000010",
                           provenance={"run_id": run_id, "checkpoint": str(checkpoint.path)})

The folder is written under a temporary name and renamed when complete, so a reader never
sees half an export.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from typing import Any, Mapping

import torch
from ray.rllib.core.rl_module.rl_module import RLModule

from rl.analysis import portable
from rl.analysis.activations import RESIDUAL_STREAM, layer_names
from rl.analysis.modules import AnalysisView
from rl.harness import buildinfo, records
from rl.learners.models.base import observation_dim

# Traced with (2, 3, obs_dim); both sizes stay symbolic (an example size of 1 would be specialised).
_EXAMPLE_BATCH, _EXAMPLE_TIME = 2, 3


def export_portable_module(module: RLModule, folder: str, *, provenance: Mapping[str, Any]) -> pathlib.Path:
    """Writes `folder` (program.pt2 + portable_module.json); refuses to overwrite one."""
    folder = pathlib.Path(folder)
    if folder.exists():
        raise FileExistsError(f"{folder} exists; export to a new folder or remove the old export first")
    obs_dim = observation_dim(module.observation_space)
    view = AnalysisView(module).eval()
    example = torch.zeros(_EXAMPLE_BATCH, _EXAMPLE_TIME, obs_dim)
    dims = {0: torch.export.Dim("batch"), 1: torch.export.Dim("time")}
    program = torch.export.export(view, (example,), dynamic_shapes=(dims,))
    with torch.no_grad():
        outputs = view(example)
    manifest = {
        "format": portable.FORMAT,
        "schema_version": portable.SCHEMA_VERSION,
        "module_class": f"{type(module).__module__}.{type(module).__qualname__}",
        "model_config": dict(module.model_config),
        "observation_space": repr(module.observation_space),
        "action_space": repr(module.action_space),
        "obs_dim": obs_dim,
        "outputs": sorted(outputs),
        "layers": layer_names(len(outputs[RESIDUAL_STREAM])) if RESIDUAL_STREAM in outputs else [],
        "torch_version": torch.__version__,
        "provenance": {**provenance, "exported_at": records.utc_now(), "build": buildinfo.current().as_dict()},
    }
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = pathlib.Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".partial-{folder.name}-"))
    try:
        torch.export.save(program, str(partial / portable.PROGRAM_FILE))
        records.write_json_atomically(str(partial / portable.MANIFEST_FILE), manifest)
        os.rename(partial, folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return folder

