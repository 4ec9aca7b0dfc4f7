"""Several agents in one run (agents.train_in_turn) with a stand-in Algorithm: no Ray, no training.

The real thing (RLlib PPO, Ray) runs in //experiments/cassandra_machine:ppo_vs_solver_smoke_test.
"""

import contextlib
import json
import pathlib
import signal

import pytest
from ray.rllib.algorithms.ppo import PPOConfig

from rl.harness.run import records, seeding
from rl.harness.run.manifest import AgentsInTurnRunnerRecord, ResumeSource, runner_kind
from rl.harness.run.metric_keys import ENV_STEPS, ITERATION, RETURN
from rl.harness.run.rows import RowBudget
from rl.harness.run.status import COMPLETED
from rl.harness.tests import contexts
from rl.harness.training import agents, lifecycle, runners

BATCH = 64
ROOT_SEED = 7


class _StandInAlgorithm:
    """Counts iterations and reports its seed as the return, so rows show which seed an agent got."""

    env_runner_group = None  # sampling is local: lifecycle.env_runner_nodes gives []

    def __init__(self, config):
        self.config = config
        self.iteration = 0
        self.stopped = False

    def train(self):
        self.iteration += 1
        return {
            ITERATION: self.iteration,
            ENV_STEPS: BATCH * self.iteration,
            RETURN: float(self.config.seed),
            "config": {"not": "a metric"},
        }

    def save_to_path(self, path):
        (pathlib.Path(path) / "weights.json").write_text(json.dumps({"iteration": self.iteration}))

    def stop(self):
        self.stopped = True


class _StandInConfig(PPOConfig):
    built = []

    def build_algo(self):
        algo = _StandInAlgorithm(self)
        self.built.append(algo)
        return algo


def _config():
    return _StandInConfig().environment("CartPole-v1").training(train_batch_size_per_learner=BATCH)


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch):
    monkeypatch.setattr(lifecycle, "ray_cluster", lambda context: contextlib.nullcontext(context.hardware))
    _StandInConfig.built = []


@contextlib.contextmanager
def _run(tmp_path, **options):
    context, recorder = contexts.recorded_context(tmp_path, root_seed=ROOT_SEED, **options)
    try:
        yield context
    finally:
        recorder.finish(COMPLETED)


def _rows(context):
    return records.read_json_lines(str(context.artifacts_dir / records.METRICS_FILE))


def test_each_agent_trains_in_turn_with_its_own_seed_trial_and_checkpoint(tmp_path):
    stop = runners.StopRule(training_iterations=2)
    with _run(tmp_path) as context:
        trained = list(agents.train_in_turn(context, {"mlp": _config(), "transformer": _config()}, stop=stop))

    expected_seeds = {name: seeding.SeedStreams(ROOT_SEED).integer(f"rllib/{name}") for name in ("mlp", "transformer")}
    assert [agent.name for agent in trained] == ["mlp", "transformer"]
    assert all(agent.row[ITERATION] == 2 and agent.row[ENV_STEPS] == 2 * BATCH for agent in trained)
    assert {agent.name: agent.row[RETURN] for agent in trained} == expected_seeds  # the stand-in reports its seed
    assert all(algo.stopped for algo in _StandInConfig.built)
    rows = _rows(context)
    assert [(row["agent"], row[ITERATION]) for row in rows] == [
        ("mlp", 1),
        ("mlp", 2),
        ("transformer", 1),
        ("transformer", 2),
    ]
    manifest = context.recorder.manifest
    assert [(c.trial_id, c.path, c.iteration) for c in manifest.checkpoints] == [
        ("mlp", "checkpoints/mlp/iter_000002", 2),
        ("transformer", "checkpoints/transformer/iter_000002", 2),
    ]
    for agent in trained:
        assert agent.checkpoint == context.artifacts_dir / "checkpoints" / agent.name / "iter_000002"
        assert json.loads((agent.checkpoint / "weights.json").read_text()) == {"iteration": 2}
    runner = manifest.runner
    assert isinstance(runner, AgentsInTurnRunnerRecord) and runner.stop["training_iterations"] == 2
    assert runner_kind(runner) == "agents in turn" == manifest.to_dict()["runner"]["kind"]
    assert {name: entry.rllib_seed for name, entry in runner.agents.items()} == expected_seeds
    assert runner.agents["mlp"].sampling["placement"] == "local"
    assert runner.agents["mlp"].determinism["expected"] is True
    assert runner.agents["transformer"].env_runner_nodes == ()
    summary = json.loads((context.results_dir / records.SUMMARY_FILE).read_text())
    assert sorted(summary["trial_metrics"]) == ["mlp", "transformer"]  # curves kept apart per agent


def test_the_caller_runs_between_agents_after_the_algorithm_stopped(tmp_path):
    with _run(tmp_path) as context:
        for trained in agents.train_in_turn(
            context, {"a": _config(), "b": _config()}, stop=runners.StopRule(training_iterations=1)
        ):
            assert _StandInConfig.built[-1].stopped
            assert len(_StandInConfig.built) == ["a", "b"].index(trained.name) + 1  # the next is not built yet


def test_a_stop_request_ends_the_agent_in_training_and_trains_no_further_agent(tmp_path):
    with _run(tmp_path, budget_cap=RowBudget.of(1, None)) as context:
        trained = list(
            agents.train_in_turn(
                context, {"first": _config(), "second": _config()}, stop=runners.StopRule(training_iterations=5)
            )
        )
    assert [(agent.name, agent.row[ITERATION]) for agent in trained] == [("first", 1)]
    assert [c.trial_id for c in context.recorder.manifest.checkpoints] == ["first"]


def test_a_resumed_run_is_refused_naming_the_fix(tmp_path):
    with _run(tmp_path, resume=ResumeSource(checkpoint=tmp_path)) as context:
        with pytest.raises(lifecycle.ResumeRefused, match="does not resume; start a new run") as refused:
            next(agents.train_in_turn(context, {"a": _config()}, stop=runners.StopRule(training_iterations=1)))
    assert refused.value.exit_status == 2  # a usage error: one line, exit 2


def test_a_bad_parallel_envs_fails_before_any_agent_trains(tmp_path):
    with _run(tmp_path) as context, pytest.raises(ValueError, match="not a multiple of parallel_envs=5"):
        next(
            agents.train_in_turn(
                context, {"a": _config(), "b": _config()}, stop=runners.StopRule(training_iterations=1), parallel_envs=5
            )
        )
    assert _StandInConfig.built == []


def test_the_sampling_plans_follow_the_profile_ray_cluster_yields(tmp_path, monkeypatch):
    monkeypatch.setattr(
        lifecycle, "ray_cluster", lambda context: contextlib.nullcontext(contexts.machine_profile(8))
    )  # a cluster
    with _run(tmp_path) as context:
        list(
            agents.train_in_turn(
                context, {"a": _config()}, stop=runners.StopRule(training_iterations=1), parallel_envs=8
            )
        )
    sampling = context.recorder.manifest.runner.agents["a"].sampling
    assert (sampling["placement"], sampling["num_env_runners"]) == ("remote", 4)  # 7 runners at most, dividing 8
    assert _StandInConfig.built[0].config.num_env_runners == 4


def test_a_stop_before_an_agents_first_iteration_saves_nothing_for_it(tmp_path, monkeypatch):
    with _run(tmp_path) as context:
        # SIGTERM while the first algorithm builds: the session asks the run to stop.
        monkeypatch.setattr(
            _StandInConfig,
            "build_algo",
            lambda config: signal.raise_signal(signal.SIGTERM) or _StandInAlgorithm(config),
        )
        trained = list(
            agents.train_in_turn(
                context, {"a": _config(), "b": _config()}, stop=runners.StopRule(training_iterations=1)
            )
        )
    assert trained == [] and context.recorder.manifest.checkpoints == ()
