"""Affine probes against planted structure whose R^2 is known in closed form."""

import json

import numpy as np
import pytest

from rl.analysis.probes import (
    AffineDesign,
    DistributionMismatchError,
    ProbeDataset,
    ProbeOptions,
    ProbeReport,
    SamplingDistribution,
    fit_affine_probe,
    metric_table,
    probe_layers,
    score_predictions,
)
from rl.analysis.probes.resampling import GroupPermuter, GroupSums, cluster_bootstrap, split_by_group

WIDTH = 16
NOISE_STD = 0.6
EPISODES, EPISODE_LENGTH = 1250, 20
# Dirichlet(1, 1, 1) beliefs (uniform on the simplex): Var = 2/36, Cov = -1/36.
BELIEF_COVARIANCE = (3 * np.eye(3) - np.ones((3, 3))) / 36


def expected_r2(mixing: np.ndarray, noise_std: float) -> float:
    """Population R^2 of the best affine predictor of beliefs Y from X = Y @ mixing + c + noise.

    Only second moments matter: the residual covariance is S - S M (M^T S M + s^2 I)^-1 M^T S.
    """
    s = BELIEF_COVARIANCE
    gain = s @ mixing @ np.linalg.inv(mixing.T @ s @ mixing + noise_std**2 * np.eye(mixing.shape[1]))
    return 1.0 - np.trace(s - gain @ mixing.T @ s) / np.trace(s)


@pytest.fixture(scope="module")
def planted():
    rng = np.random.default_rng(7)
    beliefs = rng.dirichlet(np.ones(3), size=EPISODES * EPISODE_LENGTH)
    mixing = rng.normal(size=(3, WIDTH))
    offset = rng.normal(size=WIDTH)
    activations = beliefs @ mixing + offset + NOISE_STD * rng.normal(size=(len(beliefs), WIDTH))
    unrelated = rng.normal(size=(len(beliefs), WIDTH))
    dataset = ProbeDataset(
        activations={"planted": activations, "unrelated": unrelated},
        targets=beliefs,
        groups=np.repeat(np.arange(EPISODES), EPISODE_LENGTH),
        distribution=SamplingDistribution.process_rollouts(
            env="planted",
            policy="none",
            num_episodes=EPISODES,
            max_steps=EPISODE_LENGTH,
            seed_stream="test",
            action_sampling="none",
        ),
        target_name="belief",
    )
    report = probe_layers(dataset, seed=np.random.SeedSequence(3), options=ProbeOptions(num_permutations=50))
    return dataset, report, expected_r2(mixing, NOISE_STD)


def test_planted_structure_gives_the_expected_r2(planted):
    _, report, expected = planted
    result = report.layer("planted")
    # Held-out R^2 of this design (20000 train rows, 5000 test rows) is unbiased with a standard
    # deviation of 0.0034 (measured over 40 independent data sets); 0.015 is 4.4 of them.
    assert 0.5 < expected < 0.95  # a regime where a wrong formula or fit would show
    assert result.test.r2 == pytest.approx(expected, abs=0.015)
    # The cluster bootstrap interval is calibrated: its half-width is about 1.96 x 0.0034.
    low, high = result.bootstrap["r2"]
    assert low < result.test.r2 < high
    assert (high - low) / 2 == pytest.approx(1.96 * 0.0034, rel=0.3)
    assert result.test.mse / result.test.target_variance == pytest.approx(1 - result.test.r2)
    # The controls are about zero. A probe fitted to permuted targets has random weights of size
    # sqrt(d / n_train) ~ 0.03, and on activations that do carry the beliefs its predictions
    # correlate with them by chance: measured over 500 permutations the null R^2 has a standard
    # deviation of 0.009 and a maximum of 0.03, so 0.03 and 0.04 are >3 standard deviations.
    assert abs(result.shuffle_control.r2) < 0.03
    assert abs(result.baseline.r2) < 0.01 and result.baseline.r2 <= 0
    assert result.permutation_null["p_value"] == pytest.approx(1 / 51)
    assert abs(result.permutation_null["r2_mean"]) < 0.01
    assert result.permutation_null["r2_max"] < 0.04


def test_unrelated_activations_give_r2_near_zero(planted):
    _, report, _ = planted
    result = report.layer("unrelated")
    # With no signal, held-out R^2 is about -(d+1)/n_train = -0.001, give or take the 0.003 error.
    assert abs(result.test.r2) < 0.01
    assert abs(result.shuffle_control.r2) < 0.01
    assert result.permutation_null["p_value"] > 0.05


def test_the_split_never_shares_a_group(planted):
    dataset, report, _ = planted
    split = split_by_group(dataset.groups, test_fraction=0.2, rng=np.random.default_rng(0))
    assert not set(dataset.groups[split.train]) & set(dataset.groups[split.test])
    assert (split.num_train_groups, split.num_test_groups) == (1000, 250)
    assert report.split == {"num_train": 20000, "num_test": 5000, "num_train_groups": 1000, "num_test_groups": 250}


def test_least_squares_matches_numpy_lstsq_with_an_intercept_column():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(200, 5)), rng.normal(size=(200, 3))
    reference, *_ = np.linalg.lstsq(np.hstack([x, np.ones((200, 1))]), y, rcond=None)
    probe = fit_affine_probe(x, y)
    np.testing.assert_allclose(probe.weights, reference[:5], atol=1e-12)
    np.testing.assert_allclose(probe.bias, reference[5], atol=1e-12)


def test_ridge_is_explicit_recorded_and_leaves_the_intercept_unpenalised():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(100, 4)) + 5.0, rng.normal(size=(100, 2))
    probe = fit_affine_probe(x, y, ridge=10.0)
    centred = x - x.mean(axis=0)
    reference = np.linalg.solve(centred.T @ centred + 10.0 * np.eye(4), centred.T @ (y - y.mean(axis=0)))
    np.testing.assert_allclose(probe.weights, reference, atol=1e-12)
    np.testing.assert_allclose(probe.predict(x).mean(axis=0), y.mean(axis=0), atol=1e-12)
    assert probe.ridge == 10.0 and fit_affine_probe(x, y).ridge == 0.0
    with pytest.raises(ValueError, match="ridge must be >= 0"):
        AffineDesign(x, ridge=-1.0)


def test_rank_deficient_activations_still_fit():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(300, 2))
    x = np.hstack([base, base @ rng.normal(size=(2, 3))])  # width 5, rank 2
    y = base @ rng.normal(size=(2, 3)) + 1.0
    assert score_predictions(fit_affine_probe(x, y).predict(x), y).r2 == pytest.approx(1.0, abs=1e-12)


def test_mse_and_variance_are_means_over_samples_and_components():
    targets = np.array([[0.0, 1.0], [2.0, 3.0]])
    score = score_predictions(np.zeros((2, 2)), targets)
    assert score.mse == pytest.approx((0 + 1 + 4 + 9) / 4)
    assert score.target_variance == pytest.approx(1.0)  # each column varies by +-1 around its mean
    with pytest.raises(ValueError, match="constant"):
        score_predictions(np.zeros((2, 2)), np.ones((2, 2)))


def test_cluster_bootstrap_equals_recomputing_on_resampled_groups():
    rng = np.random.default_rng(4)
    groups = np.repeat(np.arange(6), [3, 5, 2, 4, 4, 1])
    targets, errors = rng.normal(size=(19, 3)), rng.normal(size=(19, 3))
    sums = GroupSums.of(errors, targets, groups)
    counts = np.random.default_rng(9).multinomial(6, np.full(6, 1 / 6), size=1)[0]
    rows = np.concatenate([np.flatnonzero(groups == g) for g in range(6) for _ in range(counts[g])])
    direct = score_predictions(targets[rows] + errors[rows], targets[rows])
    # One resample with the same generator state reproduces the direct computation.
    interval = cluster_bootstrap(sums, num_resamples=1, confidence=0.5, rng=np.random.default_rng(9))
    assert interval["mse"][0] == pytest.approx(direct.mse)
    assert interval["r2"][0] == pytest.approx(direct.r2)


def test_group_permutation_swaps_whole_groups_of_equal_size_in_order():
    groups = np.repeat(np.arange(5), [2, 2, 2, 3, 1])
    permuter = GroupPermuter(groups)
    assert permuter.permutable_fraction == pytest.approx(6 / 10)
    rng = np.random.default_rng(0)
    for _ in range(20):
        source = permuter.draw(rng)
        assert sorted(source) == list(range(10))
        np.testing.assert_array_equal(source[6:], [6, 7, 8, 9])  # unique sizes stay
        for start in (0, 2, 4):  # a pair moves as a pair, first row to first row
            assert source[start] % 2 == 0 and source[start + 1] == source[start] + 1
    with pytest.raises(ValueError, match="fixed-length episodes"):
        GroupPermuter(np.repeat(np.arange(3), [1, 2, 3]))
    with pytest.raises(ValueError, match="ordered by group"):
        GroupPermuter(np.array([1, 1, 0, 0]))


def test_report_round_trips_through_json(planted, tmp_path):
    _, report, _ = planted
    path = tmp_path / "probe_report.json"
    report.write(str(path))
    again = ProbeReport.read(str(path))
    assert again.as_dict() == json.loads(path.read_text())
    assert again.layer("planted").test == report.layer("planted").test
    assert again.distribution == report.distribution
    assert json.loads(path.read_text())["options"]["ridge"] == 0.0


def test_raw_mse_is_never_compared_across_distributions(planted):
    _, report, _ = planted
    uniform = SamplingDistribution.uniform_contexts(
        process="planted", num_tokens=3, max_length=4, group_prefix_length=2
    )
    other = ProbeReport(**{**report.__dict__, "distribution": uniform})
    assert metric_table([report, report], "mse")["planted"][0] == report.layer("planted").test.mse
    assert len(metric_table([report, other], "r2")["planted"]) == 2
    with pytest.raises(DistributionMismatchError, match="Compare 'r2'"):
        metric_table([report, other], "mse")
    with pytest.raises(DistributionMismatchError):
        metric_table([report, other], "baseline_mse")


def test_bad_options_and_datasets_name_the_fix(planted):
    dataset, _, _ = planted
    with pytest.raises(ValueError, match="test_fraction"):
        ProbeOptions(test_fraction=1.0)
    with pytest.raises(ValueError, match="one id per target row"):
        ProbeDataset(
            activations={"a": np.zeros((3, 2))},
            targets=np.zeros((3, 1)),
            groups=np.zeros(2),
            distribution=dataset.distribution,
            target_name="belief",
        )
    assert split_by_group(np.arange(50), test_fraction=0.2, rng=np.random.default_rng(0)).num_test_groups == 10
    with pytest.raises(ValueError, match="split 36:9 .* longer group prefix"):
        split_by_group(np.arange(45), test_fraction=0.2, rng=np.random.default_rng(0))
