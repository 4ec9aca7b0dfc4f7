"""`rl.analysis`'s face: every name of `__all__` imports, and importing the package alone loads neither torch nor Ray."""

import os
import subprocess
import sys

import rl.analysis


def test_every_name_of_the_face_imports():
    assert len(set(rl.analysis.__all__)) == len(rl.analysis.__all__)  # each name once (ruff keeps the order)
    missing = [name for name in rl.analysis.__all__ if getattr(rl.analysis, name, None) is None]
    assert missing == []


def test_importing_the_package_loads_neither_torch_nor_ray():
    code = "import sys\nimport rl.analysis\nprint(sorted({'ray', 'torch'} & set(sys.modules)))"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    shown = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"
