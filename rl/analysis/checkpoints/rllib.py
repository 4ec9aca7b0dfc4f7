"""Loading the RLModule out of an RLlib checkpoint.

    from rl.analysis.checkpoints import load_rl_module

    module = load_rl_module(checkpoint.path)      # an Algorithm, Learner or RLModule checkpoint
    module = load_rl_module(path, module_id="agent_0")

The module comes from the learner's copy (not an EnvRunner's inference-only one), so value
heads are present; it is returned in eval mode.
"""

from __future__ import annotations

import pathlib

from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_LEARNER_GROUP, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.utils.checkpoints import Checkpointable

from rl.analysis.checkpoints.discover import CheckpointNotFound


def rl_module_path(checkpoint: pathlib.Path, module_id: str = DEFAULT_MODULE_ID) -> pathlib.Path:
    """The single-module folder inside an Algorithm, Learner or RLModule checkpoint."""
    checkpoint = pathlib.Path(checkpoint).resolve()  # RLlib reads paths as URIs: relative ones fail
    candidates = [
        checkpoint / COMPONENT_LEARNER_GROUP / COMPONENT_LEARNER / COMPONENT_RL_MODULE / module_id,  # Algorithm
        checkpoint / COMPONENT_RL_MODULE / module_id,  # Learner
        checkpoint / module_id,  # MultiRLModule
        checkpoint,  # RLModule
    ]
    for candidate in candidates:
        if (candidate / Checkpointable.CLASS_AND_CTOR_ARGS_FILE_NAME).is_file():
            return candidate
    raise CheckpointNotFound(
        f"no RLModule {module_id!r} in checkpoint {checkpoint} (looked for "
        f"{Checkpointable.CLASS_AND_CTOR_ARGS_FILE_NAME} in {', '.join(str(c) for c in candidates)}); "
        "pass an Algorithm, Learner or RLModule checkpoint folder and the module id it holds"
    )


def load_rl_module(checkpoint: pathlib.Path, module_id: str = DEFAULT_MODULE_ID) -> RLModule:
    module = RLModule.from_checkpoint(str(rl_module_path(checkpoint, module_id)))
    module.eval()
    return module
