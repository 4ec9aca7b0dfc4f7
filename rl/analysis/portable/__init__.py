"""A trained module that loads with torch alone: no Ray, no RLlib, no rl.learners.

    from rl.analysis.portable import load_portable_module

    portable = load_portable_module("artifacts/<run-id>/portable/iter_000010")
    outputs = portable(obs)                  # obs (B, T, obs_dim) float32 from episode starts
    outputs["action_dist_inputs"], outputs["values"], outputs["residual_stream"]
    portable.module_class                    # "rl.learners.models.transformer.TransformerModel"
    portable.model_config, portable.provenance, portable.weights   # the RLModule's state_dict

A portable module is a folder written by `rl.analysis.checkpoints.export_portable_module`:

    program.pt2              torch.export program of rl.analysis.modules.AnalysisView (weights inside)
    portable_module.json     format, module class, model config, spaces, layers, provenance

The program runs the module's own operations, so its outputs equal the RLModule's bit for bit;
batch size and sequence length are free. It covers whole sequences from an episode start (the
analysis use); stepping with a recurrent state needs the RLModule.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import torch

FORMAT = "rl-analysis/portable-module"
SCHEMA_VERSION = 1
PROGRAM_FILE = "program.pt2"
MANIFEST_FILE = "portable_module.json"
# AnalysisView keeps the RLModule under this attribute: its state_dict keys carry the prefix.
_MODULE_PREFIX = "module."


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
        return {key[len(_MODULE_PREFIX):]: value for key, value in self.program.state_dict.items()}


def load_portable_module(folder: str) -> PortableModule:
    manifest_path = os.path.join(folder, MANIFEST_FILE)
    try:
        with open(manifest_path) as handle:
            manifest = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        raise PortableModuleError(
            f"{folder} is not a portable module ({error}); export one with "
            "rl.analysis.checkpoints.export_portable_module"
        ) from error
    if manifest.get("format") != FORMAT or manifest.get("schema_version") != SCHEMA_VERSION:
        raise PortableModuleError(
            f"{manifest_path} is format {manifest.get('format')!r} version {manifest.get('schema_version')!r}; "
            f"this rl.analysis reads {FORMAT!r} version {SCHEMA_VERSION}: re-export the checkpoint"
        )
    return PortableModule(program=torch.export.load(os.path.join(folder, PROGRAM_FILE)), manifest=manifest)
