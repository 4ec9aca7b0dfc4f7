"""Checkpoints of a run: discovery from its records, the RLModule inside (portable export re-exported).

from rl.analysis.checkpoints import export_portable_module, find_checkpoints, load_rl_module

found = find_checkpoints(run_id, roots=["experiments/mess3"])   # or from_context(context) in a recipe
module = load_rl_module(found.checkpoints[-1].path)
export_portable_module(module, folder, provenance={"run_id": run_id})
# later, anywhere, with torch alone: rl.analysis.portable.load_portable_module(folder)
"""

from rl.analysis.checkpoints.discover import (
    CheckpointNotFound,
    RunArtifacts,
    RunCheckpoint,
    find_checkpoints,
    from_context,
)
from rl.analysis.checkpoints.rllib import load_rl_module, rl_module_path
from rl.analysis.portable import export_portable_module

__all__ = [
    "CheckpointNotFound",
    "RunArtifacts",
    "RunCheckpoint",
    "export_portable_module",
    "find_checkpoints",
    "from_context",
    "load_rl_module",
    "rl_module_path",
]
