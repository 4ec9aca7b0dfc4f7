"""Portable modules: exported from real rl.learners modules, loaded in a process without Ray."""

import json
import os
import subprocess
import sys

import pytest
import torch

from rl.analysis.activations import ACTION_DIST_INPUTS, RESIDUAL_STREAM, VALUES, residual_stream_key
from rl.analysis.checkpoints import export_portable_module
from rl.analysis.modules import AnalysisView
from rl.analysis.portable import PortableModuleError, load_portable_module
from rl.analysis.tests.tiny_modules import tiny_mlp, tiny_transformer

_LOAD_WITHOUT_RAY = """
import sys
sys.modules["ray"] = None  # any import of Ray now fails
import torch
from rl.analysis.portable import load_portable_module
obs = torch.load(sys.argv[1])
results = {}
for folder in sys.argv[3:]:
    portable = load_portable_module(folder)
    results[folder] = {"outputs": portable(obs), "weights": portable.weights}
torch.save(results, sys.argv[2])
assert not [name for name in sys.modules if name.startswith(("ray.", "rl.learners"))]
"""


def test_portable_modules_load_without_ray_and_match_exactly(tmp_path):
    modules = {
        "transformer": tiny_transformer(seed=0),
        "mlp": tiny_mlp(seed=0),
        "separate critic": tiny_transformer(seed=0, separate_critic=True),
    }
    folders = {
        name: export_portable_module(module, str(tmp_path / name), provenance={"run_id": "test"})
        for name, module in modules.items()
    }
    obs = torch.randn(4, 11, 3)  # another batch size and length than the export traced
    torch.save(obs, tmp_path / "obs.pt")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run(
        [
            sys.executable,
            "-c",
            _LOAD_WITHOUT_RAY,
            str(tmp_path / "obs.pt"),
            str(tmp_path / "out.pt"),
            *map(str, folders.values()),
        ],
        check=True,
        env=environment,
    )
    loaded = torch.load(tmp_path / "out.pt")
    for name, module in modules.items():
        outputs, weights = loaded[str(folders[name])]["outputs"], loaded[str(folders[name])]["weights"]
        with torch.no_grad():
            original = AnalysisView(module)(obs)
        assert sorted(outputs) == sorted(original)
        assert (RESIDUAL_STREAM in original) == (name != "mlp")
        for key in (ACTION_DIST_INPUTS, VALUES, RESIDUAL_STREAM, residual_stream_key("critic_encoder")):
            if key in original:
                assert torch.equal(outputs[key], original[key]), (name, key)  # bit for bit
        assert all(torch.equal(weights[k], v) for k, v in module.state_dict().items())
        manifest = json.loads((folders[name] / "portable_module.json").read_text())
        assert manifest["module_class"].endswith(type(module).__name__)
        assert manifest["provenance"]["run_id"] == "test"
        assert len(manifest["layers"]) == {"mlp": 0, "transformer": 3, "separate critic": 6}[name]
    with pytest.raises(FileExistsError, match="new folder"):
        export_portable_module(modules["mlp"], str(folders["mlp"]), provenance={})


def test_a_folder_that_is_no_portable_module_names_the_fix(tmp_path):
    with pytest.raises(PortableModuleError, match="export_portable_module"):
        load_portable_module(str(tmp_path))
    (tmp_path / "portable_module.json").write_text(json.dumps({"format": "other", "schema_version": 1}))
    with pytest.raises(PortableModuleError, match="re-export"):
        load_portable_module(str(tmp_path))
