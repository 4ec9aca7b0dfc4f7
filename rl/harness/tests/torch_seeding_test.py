"""RLlib's seeding of an EnvRunner does what it did without importing torch's compiler, each case in a fresh process."""

import json
import subprocess
import sys

import pytest

from rl.harness.tests import run_helpers

# Seeds as RLlib seeds an EnvRunner, within the harness's block ("harness"), without it ("rllib"), or within it
# once the compiler is imported ("harness_after_compiler"), and prints what the seeding left behind.
SEEDING = """
import contextlib, json, random, sys
import numpy as np, torch
from ray.rllib.utils import torch_utils
from ray.rllib.utils.debug import deterministic as rllib_seeding
from rl.harness.training import torch_seeding

if sys.argv[1] == "harness_after_compiler":
    import torch._inductor.config
block = contextlib.nullcontext() if sys.argv[1] == "rllib" else torch_seeding.without_compiler_import()
with block:
    rllib_seeding.update_global_seed_if_necessary("torch", 5)
facts = {
    "compiler_imported": "torch._inductor" in sys.modules or "torch._dynamo" in sys.modules,
    "deterministic": torch.are_deterministic_algorithms_enabled(),
    "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
    "cudnn": [torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark],
    "draws": [torch.rand(3).tolist(), np.random.rand(2).tolist(), random.random()],
    "rllibs_function_back": rllib_seeding.set_torch_seed is torch_utils.set_torch_seed,
}
import torch._inductor.config as compiler_config
facts["compiler_deterministic"] = compiler_config.deterministic
print(json.dumps(facts))
"""

# Builds a remote BatchedEnvRunner (worker 1) and samples, then RLlib's own runner on the same config, and prints
# whether building the first imported the compiler and each one's actions and their log-probabilities.
RUNNERS = """
import json, sys
import numpy as np, torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from rl.harness.training.batched_env_runner import BatchedEnvRunner
from rl.harness.training.sampling_connectors import use_fast_connectors

config = (
    PPOConfig().environment("CartPole-v1").rl_module(model_config={"fcnet_hiddens": [16]})
    .env_runners(num_env_runners=1, num_envs_per_env_runner=4).debugging(seed=11)
)
use_fast_connectors(config)
facts = {}
for runner_class in (BatchedEnvRunner, SingleAgentEnvRunner):
    runner = runner_class(config=config.copy(copy_frozen=False), worker_index=1)
    episodes = [episode for _ in range(3) for episode in runner.sample(num_timesteps=100)]
    facts[runner_class.__name__] = {
        "compiler_imported": "torch._inductor" in sys.modules or "torch._dynamo" in sys.modules,
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "actions": [np.asarray(episode.get_actions()).tolist() for episode in episodes],
        "logp": [np.asarray(episode.get_extra_model_outputs("action_logp")).tolist() for episode in episodes],
    }
    runner.stop()
print(json.dumps(facts))
"""


def _facts(script: str, *args: str) -> dict:
    env = run_helpers.child_env()
    env.pop("TORCHINDUCTOR_DETERMINISTIC", None)  # the compiler's mode as each seeding leaves it
    finished = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    return json.loads(finished.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def rllibs_seeding() -> dict:
    return _facts(SEEDING, "rllib")


def test_rllibs_seeding_imports_the_compiler(rllibs_seeding):
    # What the block saves: if RLlib or torch stop importing it, the block has nothing left to do.
    assert rllibs_seeding["compiler_imported"]
    assert rllibs_seeding["deterministic"] and rllibs_seeding["compiler_deterministic"]


def test_within_the_block_the_seeding_is_rllibs_without_the_compiler(rllibs_seeding):
    harness = _facts(SEEDING, "harness")
    assert not harness["compiler_imported"]
    assert {**harness, "compiler_imported": True} == rllibs_seeding  # RLlib's function is back after the block too


def test_with_the_compiler_imported_already_rllibs_own_function_seeds(rllibs_seeding):
    assert _facts(SEEDING, "harness_after_compiler") == rllibs_seeding


def test_a_batched_runner_imports_no_compiler_and_samples_as_rllibs_seeded_runner():
    facts = _facts(RUNNERS)
    batched, rllib = facts["BatchedEnvRunner"], facts["SingleAgentEnvRunner"]
    assert not batched["compiler_imported"] and batched["deterministic"]
    assert rllib["compiler_imported"]  # RLlib's runner, built second, seeds through RLlib's function
    assert batched["actions"] == rllib["actions"]
    assert batched["logp"] == rllib["logp"]  # floats through JSON: Python's repr round-trips every bit
