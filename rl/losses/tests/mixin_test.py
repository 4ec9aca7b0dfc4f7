"""The loss-mixin contract on a stand-in Learner (torch only, like the package)."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from rl.losses import LossTermMixin, LossTermOptions, read_options


class RecordingMetrics:
    def __init__(self):
        self.logged = {}

    def log_dict(self, values, *, key, window):
        assert window == 1
        self.logged.update({(key, name): value for name, value in values.items()})


class BaseLearner:
    """Duck-types the part of RLlib's Learner the mixin relies on."""

    def __init__(self):
        self.metrics = RecordingMetrics()
        self.term_calls = []

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        return torch.tensor(1.0)


@dataclasses.dataclass(frozen=True)
class ScaledOptions(LossTermOptions):
    scale: float = 1.0


class TermA(LossTermMixin):
    loss_namespace = "term_a"
    loss_options_class = ScaledOptions

    def compute_loss_term(self, *, module_id, config, batch, fwd_out, options):
        self.term_calls.append("term_a")
        return torch.tensor(2.0) * options.scale, {"extra": torch.tensor(7.0)}


class TermB(LossTermMixin):
    loss_namespace = "term_b"

    def compute_loss_term(self, *, module_id, config, batch, fwd_out, options):
        self.term_calls.append("term_b")
        return torch.tensor(10.0), {}


class StackedLearner(TermA, TermB, BaseLearner):
    pass


def loss_of(learner, learner_config_dict):
    config = SimpleNamespace(learner_config_dict=learner_config_dict)
    return learner.compute_loss_for_module(module_id="p0", config=config, batch={}, fwd_out={})


def test_terms_stack_with_their_coefficients_and_namespaced_metrics():
    learner = StackedLearner()
    loss = loss_of(learner, {"term_a/loss_coefficient": 0.5, "term_a/scale": 3.0, "term_b/loss_coefficient": 0.1})
    assert loss.item() == pytest.approx(1.0 + 0.5 * 6.0 + 0.1 * 10.0)
    assert sorted(learner.term_calls) == ["term_a", "term_b"]
    logged = {key: value.item() for key, value in learner.metrics.logged.items()}
    assert logged == {("p0", "term_a/loss"): 6.0, ("p0", "term_a/extra"): 7.0, ("p0", "term_b/loss"): 10.0}


def test_zero_coefficient_costs_nothing():
    learner = StackedLearner()
    loss = loss_of(learner, {"term_a/loss_coefficient": 0.0, "term_b/loss_coefficient": 0})
    assert loss.item() == 1.0
    assert learner.term_calls == [] and learner.metrics.logged == {}


def test_options_errors_name_the_key_and_the_fix():
    with pytest.raises(ValueError, match=r"lacks 'term_b/loss_coefficient'"):
        loss_of(StackedLearner(), {"term_a/loss_coefficient": 1.0})
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['term_a/scal'\].*'term_a/scale'"):
        read_options({"term_a/loss_coefficient": 1.0, "term_a/scal": 2.0}, "term_a", ScaledOptions)
    with pytest.raises(ValueError, match=r"term_b/loss_coefficient must be a finite number >= 0.0, got -1"):
        read_options({"term_b/loss_coefficient": -1}, "term_b", LossTermOptions)
    with pytest.raises(ValueError, match="got True"):
        read_options({"term_b/loss_coefficient": True}, "term_b", LossTermOptions)


def test_a_term_defined_on_a_parent_and_named_on_the_child_is_added_once():
    class Shared(LossTermMixin):
        def compute_loss_term(self, *, module_id, config, batch, fwd_out, options):
            self.term_calls.append(type(self).__name__)
            return torch.tensor(4.0), {}

    class Named(Shared, BaseLearner):
        loss_namespace = "named"

    learner = Named()
    assert loss_of(learner, {"named/loss_coefficient": 0.25}).item() == pytest.approx(2.0)
    assert learner.term_calls == ["Named"]


def test_term_classes_are_checked_when_defined():
    with pytest.raises(TypeError, match="without '/'"):

        class BadNamespace(LossTermMixin):
            loss_namespace = "a/b"

    with pytest.raises(TypeError, match="implement compute_loss_term instead"):

        class OverridesTheWrapper(LossTermMixin):
            loss_namespace = "c"

            def compute_loss_for_module(self, **kwargs):
                return torch.tensor(0.0)
