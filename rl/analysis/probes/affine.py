"""Affine probes: least squares with an intercept, scored by MSE against the target variance.

    from rl.analysis.probes import fit_affine_probe, score_predictions

    probe = fit_affine_probe(train_activations, train_beliefs)          # ridge=0.0: plain OLS
    score = score_predictions(probe.predict(test_activations), test_beliefs)
    score.mse, score.target_variance, score.r2                          # r2 == 1 - mse / target_variance

Conventions (they match Shai et al. 2024, whose mean-belief baseline on Mess3 is about 0.111):
`mse` is the mean over samples *and* target components of the squared error; `target_variance`
is the same mean for the constant prediction "mean of these targets", so `mse / target_variance`
is `1 - r2` and comparable across data sets, while raw `mse` is not (see `distribution.py`).

`AffineDesign` factorises the activations once (an SVD of the centred matrix), so refitting on
many target matrices (shuffle control, permutation null) costs one small matrix product each.
"""

from __future__ import annotations

import dataclasses

import numpy as np

# Singular values below this fraction of the largest are treated as zero (numpy.linalg.lstsq's
# default rcond is eps * max(n, d); a fixed 1e-10 is as safe in float64 and independent of n).
_RCOND = 1e-10


@dataclasses.dataclass(frozen=True)
class AffineProbe:
    """`targets ~= activations @ weights + bias`; `ridge` is the penalty it was fitted with."""

    weights: np.ndarray  # (activation_dim, target_dim)
    bias: np.ndarray  # (target_dim,)
    ridge: float

    def predict(self, activations: np.ndarray) -> np.ndarray:
        return _as_matrix(activations, "activations") @ self.weights + self.bias


@dataclasses.dataclass(frozen=True)
class ProbeScore:
    """Held-out quality of predictions: `r2 = 1 - mse / target_variance`."""

    mse: float
    target_variance: float
    r2: float

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


class AffineDesign:
    """The activations of a training set, factorised once for many affine fits.

        design = AffineDesign(train_activations, ridge=0.0)
        probe = design.fit(train_targets)
        shuffled = design.fit(train_targets[rng.permutation(len(train_targets))])

    The intercept is never penalised: ridge shrinks only the weights of centred activations.
    """

    def __init__(self, activations: np.ndarray, *, ridge: float = 0.0):
        activations = _as_matrix(activations, "activations")
        if not np.isfinite(activations).all():
            raise ValueError("activations contain NaN or inf; drop or fix those samples before probing")
        if ridge < 0:
            raise ValueError(f"ridge must be >= 0 (0 is plain least squares), got {ridge}")
        if activations.shape[0] < 2:
            raise ValueError(f"an affine probe needs at least 2 training samples, got {activations.shape[0]}")
        self.ridge = float(ridge)
        self.num_samples = activations.shape[0]
        self._mean = activations.mean(axis=0)
        u, s, vt = np.linalg.svd(activations - self._mean, full_matrices=False)
        keep = s > _RCOND * (s[0] if s.size else 0.0)
        u, s, vt = u[:, keep], s[keep], vt[keep]
        # weights = V diag(s / (s^2 + ridge)) U^T (Y - mean(Y)); ridge = 0 gives the pseudo-inverse.
        self._left = u
        self._right = vt.T * (s / (s**2 + self.ridge))

    def fit(self, targets: np.ndarray) -> AffineProbe:
        targets = _as_matrix(targets, "targets")
        if targets.shape[0] != self.num_samples:
            raise ValueError(
                f"targets have {targets.shape[0]} rows but the activations have {self.num_samples}; "
                "pass one target row per activation row"
            )
        target_mean = targets.mean(axis=0)
        weights = self._right @ (self._left.T @ (targets - target_mean))
        return AffineProbe(weights=weights, bias=target_mean - self._mean @ weights, ridge=self.ridge)


def fit_affine_probe(activations: np.ndarray, targets: np.ndarray, *, ridge: float = 0.0) -> AffineProbe:
    """Least squares with intercept (`ridge > 0` only as an explicit choice; it is recorded)."""
    return AffineDesign(activations, ridge=ridge).fit(targets)


def score_predictions(predictions: np.ndarray, targets: np.ndarray) -> ProbeScore:
    """MSE (mean over samples and components), the targets' variance in the same units, and R^2."""
    predictions = _as_matrix(predictions, "predictions")
    targets = _as_matrix(targets, "targets")
    if predictions.shape != targets.shape:
        raise ValueError(f"predictions {predictions.shape} and targets {targets.shape} must have the same shape")
    mse = float(np.mean((predictions - targets) ** 2))
    variance = float(np.mean((targets - targets.mean(axis=0)) ** 2))
    if variance == 0.0:
        raise ValueError("the targets are constant, so R^2 is undefined; probe a set whose targets vary")
    return ProbeScore(mse=mse, target_variance=variance, r2=1.0 - mse / variance)


def _as_matrix(array: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(array, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(
            f"{name} must be a (samples, features) matrix, got shape {array.shape}; "
            "reshape a single feature to (samples, 1)"
        )
    return array
