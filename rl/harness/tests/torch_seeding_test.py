"""RLlib's seeding of an EnvRunner does what it did without importing torch's compiler, each case in a fresh process."""

import hashlib
import inspect
import json
import subprocess
import sys

import pytest
import torch
from ray.rllib.utils import torch_utils

from rl.harness.tests import run_helpers

# Seeds as RLlib seeds an EnvRunner, within the harness's block ("harness"), without it ("rllib"), within it
# once the compiler is imported ("harness_after_compiler"), or in another thread while the block is open
# ("other_thread"), and prints what the seeding left behind.
SEEDING = """
import contextlib, json, random, sys, threading
import numpy as np, torch
from ray.rllib.utils import torch_utils
from ray.rllib.utils.debug import deterministic as rllib_seeding
from rl.harness.training import torch_seeding

if sys.argv[1] == "harness_after_compiler":
    import torch._inductor.config
torch.backends.cudnn.benchmark = True  # so that the seeding's turning it off shows
block = contextlib.nullcontext() if sys.argv[1] == "rllib" else torch_seeding.without_compiler_import()
with block:
    if sys.argv[1] == "other_thread":
        thread = threading.Thread(target=rllib_seeding.update_global_seed_if_necessary, args=("torch", 5))
        thread.start()
        thread.join()
    else:
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


# What torch_seeding reproduces, by their source (torch 2.13, RLlib 2.56): if either changes, check that the
# block still does what they do, and update the hashes.
REPRODUCED_SOURCES = {
    "torch.use_deterministic_algorithms": (torch.use_deterministic_algorithms, "ad37085c8a5c2208"),
    "ray.rllib.utils.torch_utils.set_torch_seed": (torch_utils.set_torch_seed, "1d7871be3e358966"),
}


@pytest.fixture(scope="module")
def facts() -> dict[str, dict]:
    """What each case printed, the cases run side by side (each a fresh interpreter importing RLlib)."""
    env = run_helpers.child_env()
    env.pop("TORCHINDUCTOR_DETERMINISTIC", None)  # the compiler's mode as each seeding leaves it
    cases = {mode: (SEEDING, mode) for mode in ("rllib", "harness", "harness_after_compiler", "other_thread")}
    cases["runners"] = (RUNNERS,)
    started = {
        case: subprocess.Popen(
            [sys.executable, "-c", *script_and_args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for case, script_and_args in cases.items()
    }
    printed = {}
    for case, process in started.items():
        stdout, stderr = process.communicate(timeout=180)
        assert process.returncode == 0 and stdout.strip(), f"{case}: {stderr[-3000:]}"
        printed[case] = json.loads(stdout.strip().splitlines()[-1])
    return printed


def test_the_functions_it_reproduces_are_those_it_was_checked_against():
    for name, (function, expected) in REPRODUCED_SOURCES.items():
        assert hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16] == expected, name


def test_rllibs_seeding_imports_the_compiler(facts):
    # What the block saves: if RLlib or torch stop importing it, the block has nothing left to do.
    rllib = facts["rllib"]
    assert rllib["compiler_imported"]
    assert rllib["deterministic"] and rllib["compiler_deterministic"]
    assert rllib["cudnn"] == [True, False]


def test_within_the_block_the_seeding_is_rllibs_without_the_compiler(facts):
    assert not facts["harness"]["compiler_imported"]
    # RLlib's function is back after the block too.
    assert {**facts["harness"], "compiler_imported": True} == facts["rllib"]


def test_with_the_compiler_imported_already_rllibs_own_function_seeds(facts):
    assert facts["harness_after_compiler"] == facts["rllib"]


def test_other_threads_seed_with_rllibs_own_function_while_the_block_is_open(facts):
    assert facts["other_thread"]["compiler_imported"]


def test_a_batched_runner_imports_no_compiler_and_samples_as_rllibs_seeded_runner(facts):
    batched, rllib = facts["runners"]["BatchedEnvRunner"], facts["runners"]["SingleAgentEnvRunner"]
    assert not batched["compiler_imported"] and batched["deterministic"]
    assert rllib["compiler_imported"]  # RLlib's runner, built second, seeds through RLlib's function
    assert batched["actions"] == rllib["actions"]
    assert batched["logp"] == rllib["logp"]  # floats through JSON: Python's repr round-trips every bit
