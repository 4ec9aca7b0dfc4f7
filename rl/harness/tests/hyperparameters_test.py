"""--set: typed overrides of a recipe's declared hyperparameters, recorded, shown, diffed and repeated."""

import pytest

from rl.harness.commands import cli, reproduce
from rl.harness.errors import EXIT_USAGE, UsageError
from rl.harness.run import records
from rl.harness.run.hyperparameters import Hyperparameters, Range, set_arguments
from rl.harness.run.manifest import read_manifest
from rl.harness.tests import run_helpers

DECLARED = Hyperparameters(
    {"ppo/lr": 1e-3, "model/d_model": 32, "ppo/use_gae": True, "env/name": "mess3"},
    ranges={"ppo/lr": Range.positive(), "model/d_model": Range(1)},
)
WIDTHS = {"model/d_model": Range(1), "model/n_heads": Range(1)}


def test_values_parse_as_their_defaults_types():
    assert DECLARED.parse(["ppo/lr=5e-4", "model/d_model=64", "ppo/use_gae=false", "env/name=tiger"]) == {
        "ppo/lr": 5e-4,
        "model/d_model": 64,
        "ppo/use_gae": False,
        "env/name": "tiger",
    }
    assert DECLARED.parse(["ppo/lr=1"]) == {"ppo/lr": 1.0}  # a whole number is a float too
    assert DECLARED.parse(["ppo/lr=1", "ppo/lr=2"]) == {"ppo/lr": 2.0}  # the last one wins


@pytest.mark.parametrize(
    "assignment, message",
    [
        ("ppo/learning_rate=1", "--set ppo/learning_rate: unknown hyperparameter"),
        ("model/d_model=6.5", "--set model/d_model=6.5: expected int"),
        ("ppo/lr=fast", "--set ppo/lr=fast: expected float"),
        ("ppo/use_gae=yes", "expected bool"),
        ("ppo/lr", "is not key=value"),
    ],
)
def test_a_bad_assignment_names_the_valid_keys_and_types(assignment, message):
    with pytest.raises(UsageError) as raised:
        DECLARED.parse([assignment])
    assert message in str(raised.value)
    assert "valid keys: env/name (str), model/d_model (int), ppo/lr (float), ppo/use_gae (bool)" in str(raised.value)


@pytest.mark.parametrize("assignment", ["ppo/lr=nan", "ppo/lr=inf", "ppo/lr=-Infinity", "model/d_model=inf"])
def test_a_non_finite_number_is_refused_as_such(assignment):
    name, _, _text = assignment.partition("=")
    with pytest.raises(UsageError) as raised:
        DECLARED.parse([assignment])
    kind = type(DECLARED.defaults[name]).__name__
    assert str(raised.value) == (
        f"--set {assignment}: not a finite number; give a finite {kind}, e.g. the default"
        f" {name}={DECLARED.defaults[name]!r}"
    )


def _heads_divide_width(values):
    if values["model/d_model"] % values["model/n_heads"]:
        raise ValueError(
            f"model/d_model must be divisible by model/n_heads; type e.g. --set model/d_model="
            f"{values['model/n_heads'] * 8}"
        )


def test_the_recipes_check_sees_every_value_and_names_what_was_set():
    declared = Hyperparameters({"model/d_model": 32, "model/n_heads": 2}, check=_heads_divide_width, ranges=WIDTHS)
    assert declared.parse(["model/n_heads=4"]) == {"model/n_heads": 4}
    with pytest.raises(UsageError) as raised:
        declared.parse(["model/n_heads=5"])
    assert str(raised.value) == (
        "--set model/n_heads=5: model/d_model must be divisible by model/n_heads; type e.g. --set model/d_model=40"
    )
    broken = Hyperparameters({"model/d_model": 30, "model/n_heads": 4}, check=_heads_divide_width, ranges=WIDTHS)
    with pytest.raises(UsageError, match="^the recipe's defaults: model/d_model must be divisible"):
        broken.parse([])


def test_a_bad_declaration_is_refused():
    with pytest.raises(ValueError, match="<namespace>/<field>"):
        Hyperparameters({"lr": 1e-3})
    with pytest.raises(ValueError, match="use bool, int, float or str"):
        Hyperparameters({"ppo/layers": [1, 2]})
    with pytest.raises(ValueError, match=r"ppo/lr \(float\) declares no range; pass ranges=\{'ppo/lr': Range"):
        Hyperparameters({"ppo/lr": 1e-3})
    with pytest.raises(ValueError, match=r"ppo/gamma's default 1.5 is outside its range \(in \[0, 1\]\)"):
        Hyperparameters({"ppo/gamma": 1.5}, ranges={"ppo/gamma": Range(0, 1)})
    with pytest.raises(ValueError, match="ranges of env/name: a range belongs to an int or float"):
        Hyperparameters({"env/name": "mess3"}, ranges={"env/name": Range()})


@pytest.mark.parametrize(
    "assignment, message",
    [
        ("ppo/lr=-1", "--set ppo/lr=-1: out of range; ppo/lr must be > 0 (default 0.001)"),
        ("ppo/lr=0", "--set ppo/lr=0: out of range; ppo/lr must be > 0 (default 0.001)"),
        ("ppo/gamma=1.5", "--set ppo/gamma=1.5: out of range; ppo/gamma must be in [0, 1] (default 0.9)"),
        ("ppo/clip=1", "--set ppo/clip=1: out of range; ppo/clip must be in (0, 1) (default 0.2)"),
        ("ppo/num_epochs=0", "--set ppo/num_epochs=0: out of range; ppo/num_epochs must be >= 1 (default 4)"),
        ("ppo/kl=2", "--set ppo/kl=2: out of range; ppo/kl must be <= 1 (default 0.5)"),
    ],
)
def test_a_value_out_of_its_declared_range_is_refused_naming_the_range(assignment, message):
    declared = Hyperparameters(
        {"ppo/lr": 1e-3, "ppo/gamma": 0.9, "ppo/clip": 0.2, "ppo/num_epochs": 4, "ppo/kl": 0.5},
        ranges={
            "ppo/lr": Range.positive(),
            "ppo/gamma": Range(0, 1),
            "ppo/clip": Range(0, 1, low_open=True, high_open=True),
            "ppo/num_epochs": Range(1),
            "ppo/kl": Range(None, 1),
        },
    )
    with pytest.raises(UsageError) as raised:
        declared.parse([assignment])
    assert str(raised.value) == message
    assert declared.parse(["ppo/gamma=1", "ppo/gamma=0"]) == {"ppo/gamma": 0.0}  # the closed ends are inside


def test_set_arguments_give_the_same_overrides_again():
    overrides = {"ppo/lr": 5e-4, "model/d_model": 64, "ppo/use_gae": False, "env/name": "tiger"}
    arguments = set_arguments(overrides)
    assert arguments[::2] == ["--set"] * 4
    assert DECLARED.parse(arguments[1::2]) == overrides


# -- through the command line, on the fake recipe (declares fake/iterations and fake/loss_scale) --------


@pytest.fixture
def roots(tmp_path):
    return tmp_path / "results", tmp_path / "artifacts"


def _run(roots, run_id, *args):
    results, artifacts = roots
    return run_helpers.run_fake(results, artifacts, "--run-id", run_id, *args)


def test_an_override_reaches_the_recipe_and_is_recorded_shown_diffed_and_repeated(roots, capsys):
    assert _run(roots, "plain") == 0
    assert _run(roots, "changed", "--set", "fake/iterations=3", "--set", "fake/loss_scale=2") == 0
    results, artifacts = roots
    rows = records.read_json_lines(str(artifacts / "changed" / records.METRICS_FILE))
    assert [row["training_iteration"] for row in rows] == [1, 2, 3]
    manifest = read_manifest(results / "changed")
    assert manifest.options["set"] == {"fake/iterations": 3, "fake/loss_scale": 2.0}
    assert read_manifest(results / "plain").options["set"] == {}
    capsys.readouterr()
    assert cli.main(["rl-harness", "show", "changed", "--results-dir", str(results)]) == 0
    assert "overrides: fake/iterations=3, fake/loss_scale=2.0" in capsys.readouterr().out
    assert cli.main(["rl-harness", "diff", "plain", "changed", "--results-dir", str(results)]) == 0
    assert "options.set.fake/iterations: null -> 3" in capsys.readouterr().out.replace("None", "null")
    arguments = reproduce._run_arguments(manifest, "again", "r", "a", reproduce.RowBudget.of(None, None))
    assert arguments[-4:] == ["--set", "fake/iterations=3", "--set", "fake/loss_scale=2.0"]


def test_a_bad_override_is_one_line_exit_2_and_writes_nothing(roots, capsys):
    assert _run(roots, "bad", "--set", "fake/iterations=many") == EXIT_USAGE
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "expected int; valid keys: fake/iterations (int), fake/loss_scale (float)" in error[0]
    assert not roots[0].exists()


def test_an_override_out_of_its_range_is_one_line_exit_2_and_writes_nothing(roots, capsys):
    assert _run(roots, "negative", "--set", "fake/iterations=-1") == EXIT_USAGE
    assert capsys.readouterr().err.strip() == (
        "rl-harness: error: --set fake/iterations=-1: out of range; fake/iterations must be >= 0 (default 0)"
    )
    assert not roots[0].exists()


def test_a_recipe_that_declares_nothing_refuses_set(roots, capsys):
    results, artifacts = roots
    assert (
        cli.main(
            [
                "rl-harness",
                "rl.harness.tests.ppo_cartpole_recipe",
                "--results-dir",
                str(results),
                "--artifacts-dir",
                str(artifacts),
                "--set",
                "ppo/lr=1",
            ]
        )
        == EXIT_USAGE
    )
    assert "declares no hyperparameters to --set" in capsys.readouterr().err
