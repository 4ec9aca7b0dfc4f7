"""A trained module that loads with torch alone (no Ray, no RLlib, no rl.learners), and its export.

    from rl.analysis.portable import export_portable_module, load_portable_module

    export_portable_module(module, "artifacts/<run-id>/portable/iter_000010",   # an RLModule (Ray needed)
                           provenance={"run_id": run_id, "checkpoint": str(checkpoint.path)})

    portable = load_portable_module("artifacts/<run-id>/portable/iter_000010")
    outputs = portable(obs)                  # obs (B, T, obs_dim) float32 from episode starts
    outputs["action_dist_inputs"], outputs["values"], outputs["residual_stream"]
    portable.module_class                    # "rl.learners.models.transformer.TransformerModel"
    portable.model_config, portable.provenance, portable.weights   # the RLModule's state_dict

A portable module is a folder written by `export_portable_module`:

    program.pt2              torch.export program of rl.analysis.modules.AnalysisView (weights inside)
    portable_module.json     format, module class, model config, spaces, layers, provenance

The program runs the module's own operations, so its outputs equal the RLModule's bit for bit;
batch size and sequence length are free. It covers whole sequences from an episode start (the
analysis use); stepping with a recurrent state needs the RLModule. The folder is written under a
temporary name and renamed when complete, so a reader never sees half an export. Reading needs
torch only: the writer imports what needs Ray (the RLModule's view) when it is called.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

import torch

FORMAT = "rl-analysis/portable-module"
SCHEMA_VERSION = 1
PROGRAM_FILE = "program.pt2"
MANIFEST_FILE = "portable_module.json"
# AnalysisView keeps the RLModule under this attribute: its state_dict keys carry the prefix.
_MODULE_PREFIX = "module."
# Traced with (2, 3, obs_dim); both sizes stay symbolic (an example size of 1 would be specialised).
_EXAMPLE_BATCH, _EXAMPLE_TIME = 2, 3


class PortableModuleError(RuntimeError):
    """The folder is not a readable portable module; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class PortableModule:
    program: torch.export.ExportedProgram
    manifest: dict[str, Any]

    def __post_init__(self):
        object.__setattr__(self, "_callable", self.program.module())

    def __call__(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return self._callable(obs)

    @property
    def module_class(self) -> str:
        return self.manifest["module_class"]

    @property
    def model_config(self) -> dict[str, Any]:
        return self.manifest["model_config"]

    @property
    def provenance(self) -> dict[str, Any]:
        return self.manifest["provenance"]

    @property
    def weights(self) -> dict[str, torch.Tensor]:
        """The RLModule's state_dict (what `module.load_state_dict` takes)."""
        return {key[len(_MODULE_PREFIX) :]: value for key, value in self.program.state_dict.items()}


def load_portable_module(folder: str) -> PortableModule:
    manifest_path = os.path.join(folder, MANIFEST_FILE)
    try:
        with open(manifest_path) as handle:
            manifest = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        raise PortableModuleError(
            f"{folder} is not a portable module ({error}); export one with rl.analysis.portable.export_portable_module"
        ) from error
    if manifest.get("format") != FORMAT or manifest.get("schema_version") != SCHEMA_VERSION:
        raise PortableModuleError(
            f"{manifest_path} is format {manifest.get('format')!r} version {manifest.get('schema_version')!r}; "
            f"this rl.analysis reads {FORMAT!r} version {SCHEMA_VERSION}: re-export the checkpoint"
        )
    return PortableModule(program=torch.export.load(os.path.join(folder, PROGRAM_FILE)), manifest=manifest)


def export_portable_module(module, folder: str, *, provenance: Mapping[str, Any]) -> pathlib.Path:
    """Writes `folder` (program.pt2 + portable_module.json) for an RLModule; refuses to overwrite one."""
    # Imported here so that reading a portable module never imports Ray or rl.learners.
    from rl.analysis.activations import layer_names, residual_streams
    from rl.analysis.modules import AnalysisView
    from rl.harness.run import buildinfo, records, status
    from rl.learners.models import observation_dim

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
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "module_class": f"{type(module).__module__}.{type(module).__qualname__}",
        "model_config": dict(module.model_config),
        "observation_space": repr(module.observation_space),
        "action_space": repr(module.action_space),
        "obs_dim": obs_dim,
        "outputs": sorted(outputs),
        "layers": [
            name for encoder, stream in residual_streams(outputs).items() for name in layer_names(len(stream), encoder)
        ],
        "torch_version": torch.__version__,
        "provenance": {**provenance, "exported_at": status.utc_now(), "build": buildinfo.current().as_dict()},
    }
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = pathlib.Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".partial-{folder.name}-"))
    try:
        torch.export.save(program, str(partial / PROGRAM_FILE))
        records.write_json_atomically(str(partial / MANIFEST_FILE), manifest)
        os.rename(partial, folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return folder
