"""RLlib's seeding of an EnvRunner, without the import of torch's compiler that it brings.

    from rl.harness.training import torch_seeding

    with torch_seeding.without_compiler_import():   # BatchedEnvRunner wraps RLlib's constructor in it
        super().__init__(config=config, **kwargs)

RLlib 2.56 seeds every EnvRunner it builds (`update_global_seed_if_necessary` calls
`set_torch_seed`), which on a non-CUDA build of torch turns on `torch.use_deterministic_algorithms`.
Torch 2.13's function imports `torch._inductor.config` to put its compiler in the same mode, and
with it torch._dynamo and sympy: ~800 modules, ~66 MiB of resident memory and ~1 s in a remote
runner's process, which never compiles anything (docs/performance.md, Memory). In the driver the
compiler is imported before any runner is built: the Algorithm seeds with RLlib's function first,
and torch's optimizers import torch._dynamo too.

Within `without_compiler_import()` RLlib's seeding, in the thread that entered the block, does what
it did through other doors: the same seed, torch's deterministic algorithms turned on through the
flag the public function sets (`torch._C._set_deterministic_algorithms`), and the compiler's
deterministic mode through `TORCHINDUCTOR_DETERMINISTIC`, the variable its config reads when it is
imported. The variable stays in the process's environment: the processes it starts inherit the
mode, and it is the default of every thread, where torch's function sets it for the calling
thread. Where the compiler is imported already, in other threads, or on a CUDA build (RLlib seeds
CUDA another way), RLlib's own function runs. Two private hooks, isolated here: RLlib's
module-level `set_torch_seed` name and torch's flag; tests/torch_seeding_test.py fails if either
changes.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

import torch
from ray.rllib.utils.debug import deterministic as rllib_seeding

COMPILER_CONFIG = "torch._inductor.config"
# What torch's compiler reads for its deterministic mode when its config is imported.
COMPILER_DETERMINISTIC = "TORCHINDUCTOR_DETERMINISTIC"
# One block at a time: each restores the function it replaced, so blocks must nest, not interleave.
_REPLACING = threading.RLock()


@contextlib.contextmanager
def without_compiler_import() -> Iterator[None]:
    """RLlib's torch seeding within the block, unchanged but for the compiler's import (module docstring)."""
    with _REPLACING:
        rllib_set_torch_seed = rllib_seeding.set_torch_seed
        owner = threading.get_ident()

        def set_torch_seed(seed: int | None = None) -> None:
            if (
                seed is None
                or threading.get_ident() != owner
                or torch.version.cuda is not None
                or COMPILER_CONFIG in sys.modules
            ):
                rllib_set_torch_seed(seed=seed)
                return
            torch.manual_seed(seed)
            os.environ[COMPILER_DETERMINISTIC] = "1"
            torch._C._set_deterministic_algorithms(True, warn_only=False)
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False

        rllib_seeding.set_torch_seed = set_torch_seed
        try:
            yield
        finally:
            rllib_seeding.set_torch_seed = rllib_set_torch_seed
