"""Loss functions against values computed by hand (worked out in the comments)."""

import math

import pytest
import torch

from rl.losses import (
    categorical_accuracy,
    categorical_entropy,
    categorical_kl,
    categorical_kl_terms,
    categorical_prediction_loss,
    clipped_surrogate,
    clipped_value_loss,
    masked_mean,
    midpoint_taus,
    quantile_huber_loss,
)


def test_masked_mean_ignores_masked_entries_even_non_finite_ones():
    values = torch.tensor([1.0, 3.0, float("nan"), float("inf")], requires_grad=True)
    mask = torch.tensor([True, True, False, False])
    mean = masked_mean(values, mask)
    assert mean.item() == pytest.approx(2.0)
    mean.backward()
    assert values.grad.tolist() == [0.5, 0.5, 0.0, 0.0]


def test_masked_mean_without_mask_and_with_an_empty_mask():
    assert masked_mean(torch.tensor([1.0, 2.0, 6.0])).item() == pytest.approx(3.0)
    assert masked_mean(torch.tensor([5.0, 7.0]), torch.tensor([False, False])).item() == 0.0


def test_masked_mean_rejects_bad_masks():
    with pytest.raises(ValueError, match=r"mask has shape \(3,\) but must match values.shape = \(2,\)"):
        masked_mean(torch.zeros(2), torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="bool tensor"):
        masked_mean(torch.zeros(2), torch.ones(2))


def test_midpoint_taus():
    assert midpoint_taus(4).tolist() == [0.125, 0.375, 0.625, 0.875]
    with pytest.raises(ValueError, match="positive int"):
        midpoint_taus(0)


# quantiles (0, 2, 5) at taus (0.1, 0.5, 0.9), target 3 -> delta = (3, 1, -2).
# kappa = 1: Huber = (3 - 0.5, 0.5 * 1, 2 - 0.5) = (2.5, 0.5, 1.5); weights |tau - 1{delta<0}| = (0.1, 0.5, 0.1)
#   -> (0.25, 0.25, 0.15), mean 0.65 / 3.
# kappa = 2: Huber / 2 = (2 * (3 - 1) / 2, 0.5 / 2, 0.5 * 4 / 2) = (2, 0.25, 1) -> (0.2, 0.125, 0.1), mean 0.425 / 3.
@pytest.mark.parametrize("kappa, expected", [(1.0, 0.65 / 3), (2.0, 0.425 / 3)])
def test_quantile_huber_loss_hand_computed(kappa, expected):
    quantiles = torch.tensor([[0.0, 2.0, 5.0]])
    taus = torch.tensor([0.1, 0.5, 0.9])
    loss = quantile_huber_loss(quantiles, taus, torch.tensor([3.0]), kappa=kappa)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_quantile_huber_loss_masks_steps_and_accepts_per_step_taus():
    quantiles = torch.tensor([[0.0, 2.0, 5.0], [100.0, -100.0, float("nan")]])
    taus = torch.tensor([[0.1, 0.5, 0.9], [0.3, 0.3, 0.3]])
    targets = torch.tensor([3.0, 0.0])
    loss = quantile_huber_loss(quantiles, taus, targets, kappa=1.0, mask=torch.tensor([True, False]))
    assert loss.item() == pytest.approx(0.65 / 3, rel=1e-6)


def test_quantile_huber_loss_gradient_pulls_quantiles_towards_their_level():
    # One quantile at 0, tau 0.1, target 3 (beyond kappa): loss = 0.1 * (3 - q - 0.5) -> dloss/dq = -0.1.
    quantile = torch.tensor([[0.0]], requires_grad=True)
    taus = torch.tensor([0.1], requires_grad=True)
    targets = torch.tensor([3.0], requires_grad=True)
    quantile_huber_loss(quantile, taus, targets, kappa=1.0).backward()
    assert quantile.grad.item() == pytest.approx(-0.1)
    assert taus.grad is None and targets.grad is None


def test_quantile_huber_loss_rejects_bad_input():
    quantiles = torch.zeros(4, 3)
    with pytest.raises(ValueError, match="kappa must be > 0"):
        quantile_huber_loss(quantiles, midpoint_taus(3), torch.zeros(4), kappa=0.0)
    with pytest.raises(ValueError, match="targets has shape"):
        quantile_huber_loss(quantiles, midpoint_taus(3), torch.zeros(4, 1), kappa=1.0)
    with pytest.raises(ValueError, match="taus has shape"):
        quantile_huber_loss(quantiles, midpoint_taus(2), torch.zeros(4), kappa=1.0)


# Step 1: v = 3, v_old = 0, R = 3, clip 1: unclipped error 0, clipped prediction 1 -> error 4 -> 0.5 * 4 = 2.
# Step 2: v = 0.5, v_old = 0, R = 3: both predictions are 0.5 -> 0.5 * 6.25 = 3.125.
def test_clipped_value_loss_hand_computed():
    values = torch.tensor([3.0, 0.5], requires_grad=True)
    loss = clipped_value_loss(values, torch.zeros(2), torch.tensor([3.0, 3.0]), clip=1.0)
    assert loss.item() == pytest.approx((2.0 + 3.125) / 2)
    loss.backward()
    # Step 1 is on the clipped branch (no gradient); step 2: d/dv 0.5 (v - 3)^2 / 2 = (0.5 - 3) / 2.
    assert values.grad.tolist() == pytest.approx([0.0, -1.25])
    first_only = torch.tensor([True, False])
    masked = clipped_value_loss(values, torch.zeros(2), torch.tensor([3.0, 3.0]), clip=1.0, mask=first_only)
    assert masked.item() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="clip must be > 0"):
        clipped_value_loss(values, torch.zeros(2), torch.zeros(2), clip=0.0)


# p = softmax(0, ln 3) = (0.25, 0.75), q = (0.5, 0.5): KL(p || q) = 0.25 ln 0.5 + 0.75 ln 1.5.
def test_categorical_kl_hand_computed_and_reference_gets_no_gradient():
    reference = torch.tensor([[0.0, math.log(3.0)], [0.0, 0.0]], requires_grad=True)
    logits = torch.zeros(2, 2, requires_grad=True)
    kl = categorical_kl(reference, logits, mask=torch.tensor([True, False]))
    assert kl.item() == pytest.approx(0.25 * math.log(0.5) + 0.75 * math.log(1.5), rel=1e-6)
    kl.backward()
    assert reference.grad is None
    # d KL / d logits = softmax(logits) - p = (0.5 - 0.25, 0.5 - 0.75) on the unmasked step.
    assert logits.grad.flatten().tolist() == pytest.approx([0.25, -0.25, 0.0, 0.0])
    assert categorical_kl(torch.zeros(3, 4), torch.zeros(3, 4)).item() == 0.0
    with pytest.raises(ValueError, match="logits has shape"):
        categorical_kl(torch.zeros(3, 4), torch.zeros(3, 5))


# Per step, torch's rules: p = (0.25, 0.75) against q = (0.5, 0.5) as above; a reference probability of 0
# contributes nothing; a policy probability of 0 where the reference has mass makes the KL infinite.
def test_categorical_kl_terms_per_step_follow_torchs_rules_at_zero():
    reference = torch.tensor([[0.25, 0.75], [0.0, 1.0], [0.5, 0.5]])
    policy = torch.tensor([[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]])
    with torch.no_grad():
        terms = categorical_kl_terms(reference.log(), reference, policy.log(), policy)
    assert terms.tolist()[0] == pytest.approx(0.25 * math.log(0.5) + 0.75 * math.log(1.5), rel=1e-6)
    assert terms.tolist()[1] == pytest.approx(math.log(2.0), rel=1e-6)  # 0 * ln(0 / 0.5) counts 0
    assert math.isinf(terms.tolist()[2])


# r = pi / pi_old per step: 0.5 / 0.25 = 2 (clipped to 1.2), 0.5 / 0.625 = 0.8 (unclipped), 0.5 / 1 = 0.5 (to 0.8).
# A = (1, 1, -2): min(A r, A clip(r)) = (min(2, 1.2), min(0.8, 0.8), min(-1, -1.6)) = (1.2, 0.8, -1.6).
def test_clipped_surrogate_hand_computed():
    log_probs = torch.full((3, 2), math.log(0.5), requires_grad=True)
    old = torch.log(torch.tensor([0.25, 0.625, 1.0]))
    surrogate = clipped_surrogate(log_probs, torch.tensor([0, 1, 0]), old, torch.tensor([1.0, 1.0, -2.0]), clip=0.2)
    assert surrogate.tolist() == pytest.approx([1.2, 0.8, -1.6], rel=1e-6)
    surrogate.sum().backward()
    # Only the unclipped step carries a gradient: d(A r)/d log pi(a) = A r = 0.8 at action 1 of step 2.
    assert log_probs.grad.flatten().tolist() == pytest.approx([0.0, 0.0, 0.0, 0.8, 0.0, 0.0])


# p = (0.25, 0.75): H = -(0.25 ln 0.25 + 0.75 ln 0.75); a zero probability contributes nothing.
def test_categorical_entropy_hand_computed():
    probs = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    entropy = categorical_entropy(probs.log(), probs)
    assert entropy.tolist() == pytest.approx([-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), 0.0], rel=1e-6)


# Step 1: logits (0, ln 3) -> p = (0.25, 0.75), target 1 -> -ln 0.75; argmax 1 (hit).
# Step 2: logits (0, 0) -> p = (0.5, 0.5), target 0 -> ln 2; argmax 0 (first of the tie: hit).
# Step 3: logits (ln 4, 0) -> p = (0.8, 0.2), target 1 -> -ln 0.2 = ln 5; argmax 0 (miss).
PREDICTION_LOGITS = [[0.0, math.log(3.0)], [0.0, 0.0], [math.log(4.0), 0.0]]
PREDICTION_TARGETS = [1, 0, 1]


def test_categorical_prediction_loss_and_accuracy_hand_computed():
    logits = torch.tensor(PREDICTION_LOGITS, requires_grad=True)
    targets = torch.tensor(PREDICTION_TARGETS)
    loss = categorical_prediction_loss(logits, targets)
    assert loss.item() == pytest.approx((-math.log(0.75) + math.log(2.0) + math.log(5.0)) / 3, rel=1e-6)
    assert categorical_accuracy(logits, targets).item() == pytest.approx(2 / 3)
    loss.backward()
    # d CE / d logits = (softmax - onehot(target)) / 3 steps.
    expected = [[0.25 / 3, -0.25 / 3], [-0.5 / 3, 0.5 / 3], [0.8 / 3, -0.8 / 3]]
    assert logits.grad.tolist() == [pytest.approx(row) for row in expected]


def test_categorical_prediction_loss_masks_steps_even_with_bad_padding():
    # Step 3 is padding: NaN logits and an out-of-range target never reach the result.
    logits = torch.tensor([PREDICTION_LOGITS[0], PREDICTION_LOGITS[1], [float("nan"), 0.0]])
    targets = torch.tensor([1, 0, 7])
    mask = torch.tensor([True, True, False])
    loss = categorical_prediction_loss(logits, targets, mask)
    assert loss.item() == pytest.approx((-math.log(0.75) + math.log(2.0)) / 2, rel=1e-6)
    assert categorical_accuracy(logits, targets, mask).item() == 1.0
    # (B, T) layout: the same three steps in one row.
    batched = categorical_prediction_loss(logits[None], targets[None], mask[None])
    assert batched.item() == pytest.approx(loss.item())


def test_categorical_prediction_loss_rejects_bad_input():
    logits = torch.zeros(3, 2)
    with pytest.raises(ValueError, match=r"targets has shape \(3, 1\) but must match logits.shape\[:-1\] = \(3,\)"):
        categorical_prediction_loss(logits, torch.zeros(3, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="integer class indices, got dtype torch.float32"):
        categorical_prediction_loss(logits, torch.zeros(3))
    with pytest.raises(ValueError, match=r"outside \[0, 2\) \(e.g. 2\)"):
        categorical_prediction_loss(logits, torch.tensor([0, 2, 1]))
    with pytest.raises(ValueError, match="mask has shape"):
        categorical_prediction_loss(logits, torch.zeros(3, dtype=torch.long), torch.ones(2, dtype=torch.bool))
