"""Where a study member's run writes: the study's roots, or with a store the own folder of the node that runs it."""

from rl.harness import env_vars
from rl.harness.training.member_trials import MemberTrial

_ARGV = ("python", "-m", "rl.harness.commands.cli", "rl.harness.tests.fake_recipe", "--run-id", "s1-first-s0")
_NODE = {env_vars.NODE_FOLDER_ENV: "/data/node-7"}


def _trial(node_folders):
    return MemberTrial(
        run_id="s1-first-s0",
        argv=_ARGV,
        roots=("/home/me/results", "/home/me/artifacts"),
        log="studies/s1/logs/s1-first-s0.log",
        node_folders=node_folders,
    )


def test_with_a_store_a_node_with_its_own_folder_keeps_the_member_there():
    argv, log = _trial(node_folders=True).on_node(_NODE)
    assert argv == [*_ARGV, "--results-dir", "/data/node-7/results", "--artifacts-dir", "/data/node-7/artifacts"]
    assert str(log) == "/data/node-7/artifacts/studies/s1/logs/s1-first-s0.log"


def test_a_node_without_its_own_folder_or_a_study_without_a_store_writes_to_the_study_roots():
    study_roots = [*_ARGV, "--results-dir", "/home/me/results", "--artifacts-dir", "/home/me/artifacts"]
    for trial, environ in ((_trial(node_folders=True), {}), (_trial(node_folders=False), _NODE)):
        argv, log = trial.on_node(environ)
        assert argv == study_roots
        assert str(log) == "/home/me/artifacts/studies/s1/logs/s1-first-s0.log"


def test_a_later_attempt_is_a_run_of_its_own_resumed_from_the_previous_attempts_run():
    argv, log = _trial(node_folders=True).on_node(_NODE, attempt=2)
    assert argv == [
        "python",
        "-m",
        "rl.harness.commands.cli",
        "rl.harness.tests.fake_recipe",
        "--run-id",
        "s1-first-s0-a2",
        "--resume-from",
        "s1-first-s0",
        "--results-dir",
        "/data/node-7/results",
        "--artifacts-dir",
        "/data/node-7/artifacts",
    ]
    assert str(log) == "/data/node-7/artifacts/studies/s1/logs/s1-first-s0-a2.log"


def test_an_attempt_of_a_resumed_member_continues_its_numbering_and_resumes_from_the_lost_attempt():
    resumed = MemberTrial(
        run_id="s1-first-s0-a2",
        argv=(*_ARGV[:-1], "s1-first-s0-a2", "--resume-from", "s1-first-s0", "--seed", "0"),
        roots=("/r", "/a"),
        log="studies/s1/logs/s1-first-s0-a2.log",
        node_folders=False,
    )
    assert [resumed.attempt_id(attempt) for attempt in (1, 2, 3)] == [
        "s1-first-s0-a2",
        "s1-first-s0-a3",
        "s1-first-s0-a4",
    ]
    argv, _ = resumed.on_node({}, attempt=3)
    assert argv[4:] == ["--run-id", "s1-first-s0-a4", "--seed", "0", "--resume-from", "s1-first-s0-a3"] + [
        "--results-dir",
        "/r",
        "--artifacts-dir",
        "/a",
    ]
