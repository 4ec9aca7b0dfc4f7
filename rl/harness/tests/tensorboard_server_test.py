"""A real (tiny, in-process) PPO run's events, served by TensorBoard on loopback through //tools:tensorboard's
launcher and read over its HTTP API, against the run's metrics.jsonl."""

import json
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import numpy as np
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.examples.envs.classes.stateless_cartpole import StatelessCartPole

from rl.harness.run.metric_keys import ENV_STEPS, RETURN
from rl.harness.tests import contexts
from rl.harness.training import in_process, runners

TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(port: int, path: str, **query):
    url = f"http://127.0.0.1:{port}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def _wait_for_scalars(port: int, server: subprocess.Popen, run: str, tag: str) -> list:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        assert server.poll() is None, server.communicate()[0]
        try:
            if tag in _get(port, "/data/plugin/scalars/tags").get(run, {}):
                return _get(port, "/data/plugin/scalars/scalars", run=run, tag=tag)
        except OSError:
            pass  # not listening yet
        time.sleep(0.5)
    raise AssertionError(f"TensorBoard served no {tag} of {run} within {TIMEOUT_S} s")


def test_the_server_serves_a_real_runs_return_curve_as_metrics_jsonl_has_it(tmp_path):
    config = (
        PPOConfig()
        .environment(StatelessCartPole)
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [16]})
    )
    context, recorder = contexts.recorded_context(tmp_path, root_seed=0)
    in_process.run_in_process(
        context, config, env=StatelessCartPole(), stop=runners.StopRule(training_iterations=3), parallel_envs=2
    )
    recorder.finish("completed")
    expected = [(row[ENV_STEPS], row[RETURN]) for row in context.metrics() if row.get(RETURN) is not None]
    assert expected, "the run ended no episode: no return curve to compare"

    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rl.harness.commands.tensorboard_view",
            str(tmp_path / "results"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        served = _wait_for_scalars(port, server, run="test/smoke/test", tag=RETURN)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert [step for _, step, _ in served] == [step for step, _ in expected]
    np.testing.assert_allclose([value for _, _, value in served], [value for _, value in expected], rtol=1e-6)
