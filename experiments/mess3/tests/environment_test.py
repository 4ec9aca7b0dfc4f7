"""The env creator's module stays light: every remote EnvRunner imports it (RLlib's registry pickles make_env by reference)."""

import pickle
import subprocess
import sys

from experiments.mess3.task import controlled_mess3, environment

HEAVY = ("experiments.mess3.task.controlled_mess3", "rl.analysis", "matplotlib", "rl.harness.study")


def test_the_env_module_imports_no_analysis_stack():
    code = (
        "import sys\n"
        "from experiments.mess3.task import environment\n"
        "environment.make_env().reset(seed=0)\n"
        f"print([name for name in {HEAVY!r} if name in sys.modules])\n"
    )
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert imported.strip() == "[]"


def test_the_task_registers_and_reexports_the_light_module_env():
    assert controlled_mess3.make_env is environment.make_env
    assert controlled_mess3.ENV_KWARGS is environment.ENV_KWARGS
    assert b"experiments.mess3.task.environment" in pickle.dumps(controlled_mess3.make_env)
