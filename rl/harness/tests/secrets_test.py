"""Secrets never enter a run's records: the patch, the manifest, traceback.txt, the log (no Ray).

Every secret here is a made-up string shaped like the real thing.
"""

import json
import logging
import os
import pathlib
import subprocess
import sys

import pytest
from absl import logging as absl_logging

from rl.harness import env_vars
from rl.harness.commands import cli
from rl.harness.run import provenance, records, redaction
from rl.harness.run.hyperparameters import Hyperparameters, Range
from rl.harness.run.layout import RunLayout
from rl.harness.study.record import StudyRecord
from rl.harness.tests import run_helpers

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
WANDB_KEY = "0123456789abcdef0123456789abcdef01234567"
B2_KEY = "K005abcdefghijklmnopqrstuvwxyzA"

LEAKY_RECIPE = """
import os

from rl.harness.run.hyperparameters import Hyperparameters

HYPERPARAMETERS = Hyperparameters({"leaky/note": "none"})


def run(context):
    context.recorder.log_metrics({"training_iteration": 1})
    if os.environ.get("LEAKY_FAIL"):
        raise RuntimeError("login refused for key " + os.environ["WANDB_API_KEY"] + " and " + os.environ["B2_APPLICATION_KEY"])
    return {"ok": True}
"""


@pytest.fixture
def repo(tmp_path):
    return run_helpers.committed_repo(tmp_path / "repo", {"code.py": "X = 1\n", ".gitignore": "__pycache__/\n"})


@pytest.fixture(autouse=True)
def _no_registered_secrets():
    redaction.forget_secrets()
    yield
    redaction.forget_secrets()


def _plant_secrets(repo):
    (repo / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n")
    (repo / "secrets.json").write_text(json.dumps({"aws": AWS_SECRET}))
    (repo / "id_ed25519").write_text("not even a key, but the name says it is one\n")
    (repo / "deploy.pem").write_text("certificate\n")
    (repo / "config").mkdir()
    (repo / "config" / "credentials.yaml").write_text(f"key: {AWS_SECRET}\n")
    (repo / "notes.txt").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n")
    (repo / "push.sh").write_text(f"git push https://{GITHUB_TOKEN}@github.com/x/y\n")


def test_credential_shaped_untracked_files_stay_out_of_the_patch_and_the_hash(repo):
    _plant_secrets(repo)
    (repo / "helper.py").write_text("HELPER = 1\n")
    (repo / "id_map.py").write_text("IDS = {}\n")  # code, though its name starts like an ssh key's
    change = provenance.uncommitted_change(str(repo))
    assert change.untracked == ["helper.py", "id_map.py"]
    assert sorted(change.refused) == [
        ".env",
        "config/credentials.yaml",
        "deploy.pem",
        "id_ed25519",
        "notes.txt",
        "push.sh",
        "secrets.json",
    ]
    assert "private key block" in change.refused["notes.txt"] and "GitHub token" in change.refused["push.sh"]
    for secret in (AWS_SECRET, GITHUB_TOKEN, "PRIVATE KEY", "id_ed25519", "deploy.pem"):
        assert secret.encode() not in change.patch
    state = provenance.git_state(str(repo))
    assert state["refused_untracked"] == change.refused
    # The hash covers what the patch rebuilds: the same with the secrets gone.
    for name in change.refused:
        (repo / name).unlink()
    assert provenance.git_state(str(repo))["diff_sha256"] == state["diff_sha256"]


def test_a_checkout_whose_only_change_is_a_secret_file_is_clean(repo):
    (repo / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n")
    state = provenance.git_state(str(repo))
    assert state["dirty"] is False and state["refused_untracked"] == {".env": "the name '.env' is a credential file's"}


def test_a_file_holding_a_registered_secret_is_refused_whatever_its_name(repo):
    redaction.register_secret(WANDB_KEY)
    (repo / "settings_local.py").write_text(f"KEY = '{WANDB_KEY}'\n")
    assert provenance.uncommitted_change(str(repo)).refused == {
        "settings_local.py": "it holds the value of a registered secret"
    }


def test_a_secret_across_a_scan_chunk_edge_is_found(repo):
    padding = b"x" * (provenance._SCAN_CHUNK_BYTES - 11) + b" "
    (repo / "data.txt").write_bytes(padding + GITHUB_TOKEN.encode())
    assert "data.txt" in provenance.uncommitted_change(str(repo), cap_bytes=1 << 30).refused


def test_marked_output_roots_are_left_out_whatever_their_names(repo):
    layout = RunLayout(repo / "myres", repo / "deep" / "myart", "run-1", smoke=False)
    layout.mark_roots()
    (repo / "myres" / "run-1").mkdir()
    (repo / "myres" / "run-1" / "run_manifest.json").write_text("{}")
    (repo / "deep" / "myart" / "run-1").mkdir(parents=True)
    (repo / "deep" / "myart" / "run-1" / "metrics.jsonl").write_text("{}\n")
    state = provenance.git_state(str(repo))
    assert state["dirty"] is False, state
    # Committed results that change later are outputs too.
    run_helpers.git(repo, "add", "myres")
    run_helpers.git(repo, "commit", "-q", "-m", "results")
    (repo / "myres" / "run-1" / "run_manifest.json").write_text('{"status": "completed"}')
    assert provenance.git_state(str(repo))["dirty"] is False
    (repo / "code.py").write_text("X = 2\n")
    change = provenance.uncommitted_change(str(repo))
    assert b"code.py" in change.patch and b"myres" not in change.patch and b"myart" not in change.patch


def test_a_marked_root_is_left_out_when_dot_files_are_ignored(repo):
    (repo / ".gitignore").write_text(".*\n")
    run_helpers.git(repo, "add", "-f", ".gitignore")
    run_helpers.git(repo, "commit", "-q", "-m", "ignore dot files")
    RunLayout(repo / "out", repo / "out2", "r", smoke=False).mark_roots()
    (repo / "out" / "r").mkdir()
    (repo / "out" / "r" / "summary.json").write_text("{}")
    assert provenance.git_state(str(repo))["dirty"] is False


def _leaky_run(repo, monkeypatch, *args, fail=False):
    """The leaky recipe run from inside `repo` with relative roots (the user's `--results-dir myres`)."""
    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo))
    monkeypatch.setenv("WANDB_API_KEY", WANDB_KEY)
    monkeypatch.setenv(env_vars.B2_KEY_ENV, B2_KEY)
    monkeypatch.delenv("BUILD_WORKSPACE_DIRECTORY", raising=False)
    if fail:
        monkeypatch.setenv("LEAKY_FAIL", "1")
    return cli.main(
        [
            "rl-harness",
            "leaky_recipe",
            "--results-dir",
            "myres",
            "--artifacts-dir",
            "myart",
            "--no-upload-artifacts",
            *args,
        ]
    )


@pytest.fixture
def leaky_repo(repo):
    (repo / "leaky_recipe.py").write_text(LEAKY_RECIPE)
    run_helpers.git(repo, "add", ".")
    run_helpers.git(repo, "commit", "-q", "-m", "recipe")
    sys.modules.pop("leaky_recipe", None)
    yield repo
    sys.modules.pop("leaky_recipe", None)


def test_relative_results_and_artifacts_roots_never_dirty_the_next_run(leaky_repo, monkeypatch):
    assert _leaky_run(leaky_repo, monkeypatch, "--run-id", "first") == 0
    assert _leaky_run(leaky_repo, monkeypatch, "--run-id", "second") == 0
    second = run_helpers.manifest(leaky_repo / "myres" / "second")
    assert second["code"]["experiment_repo"]["dirty"] is False
    assert "patch" not in second["code"]["experiment_repo"]
    assert (leaky_repo / "myres" / records.OUTPUT_ROOT_MARKER).is_file()
    assert (leaky_repo / "myart" / records.OUTPUT_ROOT_MARKER).is_file()


def test_a_dotenv_in_the_checkout_never_reaches_the_records_and_the_log_names_it(leaky_repo, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    (leaky_repo / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n")
    (leaky_repo / "extra.py").write_text("EXTRA = 1\n")
    with run_helpers.absl_verbosity(absl_logging.INFO):
        assert _leaky_run(leaky_repo, monkeypatch, "--run-id", "r") == 0
    results = leaky_repo / "myres" / "r"
    patch = (results / records.PATCH_FILE).read_bytes()
    assert b"extra.py" in patch and AWS_SECRET.encode() not in patch
    document = run_helpers.manifest(results)
    code = document["code"]["experiment_repo"]
    assert code["patch"]["untracked"] == ["extra.py"] and ".env" in code["refused_untracked"]
    log = caplog.text
    assert f"left {leaky_repo / '.env'} out of the run's records" in log
    assert "adds 1 untracked file(s)" in log and "extra.py" in log
    for folder in (leaky_repo / "myres", leaky_repo / "myart"):
        for path in folder.rglob("*"):
            assert path.is_dir() or AWS_SECRET.encode() not in path.read_bytes(), path


def test_a_secret_in_an_exception_message_reaches_no_record_nor_the_log(leaky_repo, monkeypatch, caplog):
    assert _leaky_run(leaky_repo, monkeypatch, "--run-id", "boom", fail=True) == 1
    document = run_helpers.manifest(leaky_repo / "myres" / "boom")
    assert document["error"]["message"] == f"login refused for key {redaction.MASK} and {redaction.MASK}"
    traceback_text = (leaky_repo / "myart" / "boom" / "traceback.txt").read_text()
    assert "login refused for key [REDACTED]" in traceback_text
    log = caplog.text
    assert "login refused for key [REDACTED]" in log
    assert any(isinstance(f, redaction.RedactingFilter) for f in absl_logging.get_absl_handler().filters)
    for text in (json.dumps(document), traceback_text, log):
        assert WANDB_KEY not in text and B2_KEY not in text


def test_secrets_on_the_command_line_are_masked_in_the_manifest(leaky_repo, monkeypatch):
    assert _leaky_run(leaky_repo, monkeypatch, "--run-id", "argv", "--set", f"leaky/note={WANDB_KEY}") == 0
    document = run_helpers.manifest(leaky_repo / "myres" / "argv")
    assert document["options"]["set"] == {"leaky/note": redaction.MASK}
    assert f"leaky/note={redaction.MASK}" in document["command_line"]
    assert WANDB_KEY not in json.dumps(document)


def test_the_environment_secrets_are_those_named_like_keys_tokens_and_secrets():
    environ = {
        "WANDB_API_KEY": WANDB_KEY,
        "HF_TOKEN": "hf_" + "x" * 34,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        env_vars.B2_KEY_ENV: B2_KEY,
        env_vars.B2_KEY_ID_ENV: "0051234567890ab0000000001",
        "DB_PASSWORD": "correct-horse-battery",
        "GITLAB_PAT": "made-up-personal-token",
        "SIGNING_KEY": "k" * 20,
        "SHORT_TOKEN": "abc",
        "PATH": "/usr/bin",
        "TOKENIZERS_PARALLELISM": "false",
    }
    assert redaction.register_environment_secrets(environ) == ["SHORT_TOKEN"]
    text = " ".join(environ.values())
    assert redaction.redact(text) == " ".join([redaction.MASK] * 8 + ["abc", "/usr/bin", "false"])


def test_redact_masks_token_shapes_it_was_never_told_about():
    aws_id, slack = "AKIA" + "ABCDEFGHIJKLMNOP", "xoxb-" + "1234567890-abcdefghij"
    text = f"push with {GITHUB_TOKEN}, id {aws_id}, slack {slack}, key {B2_KEY}; the learning rate is 3e-4"
    assert redaction.redact(text) == (
        f"push with {redaction.MASK}, id {redaction.MASK}, slack {redaction.MASK},"
        f" key {redaction.MASK}; the learning rate is 3e-4"
    )


def test_a_b2_key_from_its_file_typed_into_a_set_value_is_masked(leaky_repo, monkeypatch, tmp_path):
    """The key lives only in ~/.config/rl-harness/b2.json, and the run does not upload: still masked."""
    home = tmp_path / "home"
    config = home / ".config" / "rl-harness"
    config.mkdir(parents=True)
    key_file = config / "b2.json"
    key_file.write_text(
        json.dumps(
            {
                "application_key_id": "0051234567890ab0000000009",
                "application_key": "K005filekeyfilekeyfilekeyfilek",
                "bucket": "b",
            }
        )
    )
    key_file.chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    for name in env_vars.B2_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(leaky_repo)
    monkeypatch.syspath_prepend(str(leaky_repo))
    monkeypatch.delenv("BUILD_WORKSPACE_DIRECTORY", raising=False)
    assert (
        cli.main(
            [
                "rl-harness",
                "leaky_recipe",
                "--results-dir",
                "myres",
                "--artifacts-dir",
                "myart",
                "--no-upload-artifacts",
                "--run-id",
                "filekey",
                "--set",
                "leaky/note=K005filekeyfilekeyfilekeyfilek",
            ]
        )
        == 0
    )
    for folder in (leaky_repo / "myres", leaky_repo / "myart"):
        for path in folder.rglob("*"):
            assert path.is_dir() or b"K005filekeyfilekeyfilekeyfilek" not in path.read_bytes(), path
    assert run_helpers.manifest(leaky_repo / "myres" / "filekey")["options"]["set"] == {"leaky/note": redaction.MASK}


def test_a_token_staged_into_a_tracked_file_stays_out_of_the_patch_and_the_hash(repo):
    (repo / "code.py").write_text(f"X = 1\nPUSH_URL = 'https://{GITHUB_TOKEN}@github.com/x/y'\n")
    run_helpers.git(repo, "add", "code.py")
    (repo / "other.py").write_text("Y = 2\n")
    run_helpers.git(repo, "add", "other.py")
    state = provenance.git_state(str(repo))
    assert state["dirty"] is True and state["refused_tracked"] == {"code.py": "it holds a GitHub token"}
    change = provenance.uncommitted_change(str(repo))
    assert GITHUB_TOKEN.encode() not in change.patch and b"other.py" in change.patch
    assert change.refused == {"code.py": "it holds a GitHub token"}
    run_helpers.git(repo, "reset", "-q", "code.py")
    (repo / "code.py").write_text("X = 1\n")
    assert provenance.git_state(str(repo))["diff_sha256"] == state["diff_sha256"]  # the token was never hashed


@pytest.mark.parametrize(
    "name",
    [
        ".envrc",
        ".npmrc",
        ".aws/config",
        ".docker/config.json",
        "kubeconfig",
        "prod.kubeconfig",
        "deploy/staging.tfvars",
        "github_token.txt",
        "client_secret.json",
        ".kube/config",
    ],
)
def test_credential_file_names_are_refused(repo, name):
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text("harmless content\n")
    assert provenance.refusal(str(repo), name) is not None


@pytest.mark.parametrize("name", ["rl/analysis/token_contexts.py", "docs/token_budget.md", "tokenizer/vocab.py"])
def test_code_and_docs_named_after_tokens_are_read_not_refused_by_name(repo, name):
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text("N_TOKENS = 3\n")
    assert provenance.refusal(str(repo), name) is None


def test_a_config_module_assigning_a_secret_is_refused_without_the_variable_set(repo, monkeypatch):
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    (repo / "config.py").write_text(f'REGION = "eu-central-1"\nAWS_SECRET_ACCESS_KEY = "{AWS_SECRET}"\n')
    assert provenance.refusal(str(repo), "config.py") == "it holds a value assigned to a secret's name"
    assert AWS_SECRET.encode() not in provenance.uncommitted_change(str(repo)).patch


@pytest.mark.parametrize(
    "name",
    [
        "wandb/api_key",
        "hub/token",
        "db/password",
        "aws/secret_access_key",
        "b2/application_key_secret",
        "auth/credentials",
        "ssh/private_key",
    ],
)
def test_a_hyperparameter_named_like_a_credential_is_refused(name):
    with pytest.raises(ValueError, match="names a credential"):
        Hyperparameters({name: "x"})


@pytest.mark.parametrize("name", ["next_token_aux/loss_coefficient", "model/n_tokens", "ppo/lr", "keys/count"])
def test_ordinary_hyperparameter_names_are_accepted(name):
    Hyperparameters({name: 1}, ranges={name: Range()})


@pytest.mark.parametrize("study_id, runs", [("../../elsewhere", ["r1"]), ("ok", ["../../x"])])
def test_a_study_record_naming_paths_outside_is_refused(tmp_path, study_id, runs):
    folder = tmp_path / "studies" / "ok"
    folder.mkdir(parents=True)
    document = {
        "schema_version": 1,
        "study_id": study_id,
        "module": "m",
        "smoke": False,
        "grid": {},
        "code": {},
        "build": {},
        "command_lines": [["x"]],
        "members": [{"agent": "a", "seed": 0, "runs": runs, "status": "completed"}],
    }
    (folder / "study.json").write_text(json.dumps(document))
    with pytest.raises(records.RecordError, match="contains '/'"):
        StudyRecord.read(folder)


def test_records_honour_the_umask(tmp_path):
    previous = os.umask(0o077)
    try:
        records.write_json_atomically(str(tmp_path / "private.json"), {})
    finally:
        os.umask(previous)
    os.umask(0o022)
    try:
        records.write_json_atomically(str(tmp_path / "shared.json"), {})
    finally:
        os.umask(previous)
    assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "shared.json").stat().st_mode & 0o777 == 0o644


def test_the_log_filter_masks_records_of_any_logger(capsys):
    redaction.register_secret(WANDB_KEY)
    handler = logging.StreamHandler(sys.stderr)
    redaction.redact_handler(handler)
    logger = logging.getLogger("some.library")
    logger.addHandler(handler)
    try:
        logger.error("request failed: %s", WANDB_KEY)
    finally:
        logger.removeHandler(handler)
    assert capsys.readouterr().err == f"request failed: {redaction.MASK}\n"


def test_gitignores_cover_the_usual_secret_files_and_no_source_file(tmp_path):
    root = (
        pathlib.Path(__file__).resolve().parents[3]
    )  # the source checkout (the test file is a link into it under Bazel)
    secret = [
        ".env",
        ".env.local",
        "server.pem",
        "deploy.key",
        "id_rsa",
        "id_ed25519.pub",
        "secrets.json",
        "config/secrets.yaml",
        "secrets/token",
        "credentials.json",
        ".netrc",
        ".git-credentials",
    ]
    source = ["rl/harness/tests/secrets_test.py", "rl/harness/run/redaction.py", "credentials_check.py", "keys.py"]
    for gitignore in (root / ".gitignore", root / "experiments_template" / ".gitignore"):
        repo = tmp_path / gitignore.parent.name
        repo.mkdir()
        run_helpers.git(repo, "init", "-q")
        (repo / ".gitignore").write_text(gitignore.read_text())
        ignored = subprocess.run(
            ["git", "check-ignore", "--no-index", *secret, *source],
            cwd=repo,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        assert sorted(ignored) == sorted(secret), (gitignore, ignored)


def test_an_untracked_file_that_vanishes_while_it_is_recorded_is_left_out(repo, monkeypatch):
    (repo / "kept.py").write_text("K = 1\n")
    (repo / "gone.log").write_text("a moment\n")
    listed = provenance.untracked_files(str(repo))
    assert listed.taken == ["gone.log", "kept.py"]
    (repo / "gone.log").unlink()  # another process removed it after git listed it
    monkeypatch.setattr(provenance, "untracked_files", lambda root, pathspec=None: listed)
    change = provenance.uncommitted_change(str(repo))
    assert change.untracked == ["kept.py"] and b"gone.log" not in change.patch
    assert provenance.git_state(str(repo))["dirty"] is True
    monkeypatch.undo()
    original = provenance.refusal
    (repo / "gone.log").write_text("again\n")

    def vanishing(root, name):  # removed between the scan's check and its open
        if name == "gone.log":
            raise FileNotFoundError(2, "No such file or directory", name)
        return original(root, name)

    monkeypatch.setattr(provenance, "refusal", vanishing)
    assert provenance.untracked_files(str(repo)).taken == ["kept.py"]
