"""Composable Learner loss mixins: each adds one weighted term under its own namespace.

A term reads its options from `config.learner_config_dict["<namespace>/<field>"]`,
logs its metrics as `<namespace>/<name>`, calls `super()` so terms stack, and
costs nothing when its coefficient is zero. Only torch is imported: the mixin
relies on the Learner duck-typing RLlib's `compute_loss_for_module(*, module_id,
config, batch, fwd_out)` and `self.metrics.log_dict(...)`.

    @dataclasses.dataclass(frozen=True)
    class EntropyOptions(LossTermOptions):
        floor: float = 0.0

    class EntropyFloor(LossTermMixin):
        loss_namespace = "entropy_floor"
        loss_options_class = EntropyOptions

        def compute_loss_term(self, *, module_id, config, batch, fwd_out, options):
            term = ...                      # a scalar tensor
            return term, {"floor_hits": ...}  # extra metrics, logged as entropy_floor/<name>

    class MyLearner(EntropyFloor, PPOTorchLearner):
        pass

    config.learners(learner_class=MyLearner,
                    learner_config_dict={"entropy_floor/loss_coefficient": 0.1})
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

import torch


def require_number(name: str, value: Any, *, minimum: float, inclusive: bool) -> None:
    """Raises ValueError unless `value` is a finite real number above `minimum` (or equal, if inclusive).

    Example:
        require_number("huber_kappa", options.huber_kappa, minimum=0.0, inclusive=False)
    """
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or value < minimum or (value == minimum and not inclusive):
        bound = f">= {minimum}" if inclusive else f"> {minimum}"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}.")


@dataclasses.dataclass(frozen=True)
class LossTermOptions:
    """Options of one loss term; subclass to add fields.

    Attributes:
        loss_coefficient: weight of the term in the total loss (>= 0; 0 switches the term off
            at no cost). Required: a term that silently defaulted to off, or on, hides mistakes.
    """

    loss_coefficient: float

    def __post_init__(self) -> None:
        require_number("loss_coefficient", self.loss_coefficient, minimum=0.0, inclusive=True)


OptionsT = TypeVar("OptionsT", bound=LossTermOptions)


def read_options(learner_config_dict: Mapping[str, Any], namespace: str, options_class: type[OptionsT]) -> OptionsT:
    """Collects the `<namespace>/<field>` keys of `learner_config_dict` into a validated `options_class`.

    Unknown fields under the namespace (typos) and missing required fields raise ValueError.

    Example:
        >>> read_options({"qr_value/loss_coefficient": 0.5, "lr": 1e-3}, "qr_value", LossTermOptions)
        LossTermOptions(loss_coefficient=0.5)
    """
    prefix = namespace + "/"
    values = {key[len(prefix) :]: value for key, value in learner_config_dict.items() if key.startswith(prefix)}
    fields = {field.name: field for field in dataclasses.fields(options_class)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(
            f"learner_config_dict has unknown key(s) {[prefix + name for name in unknown]}; "
            f"{options_class.__name__} accepts {[prefix + name for name in fields]}."
        )
    for name, field in fields.items():
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        if required and name not in values:
            raise ValueError(
                f"learner_config_dict lacks '{prefix}{name}': set it explicitly, "
                f"e.g. learner_config_dict={{'{prefix}{name}': ...}}."
            )
    try:
        return options_class(**values)
    except ValueError as error:
        # Field messages start with the field's name, so this reads "learner_config_dict: ns/field must ...".
        raise ValueError(f"learner_config_dict: {prefix}{error}") from error


class LossTermMixin:
    """Adds `loss_coefficient * term` to the loss a Learner computes for each module.

    Place term classes before the Learner class in the bases. Every class that sets
    `loss_namespace` adds exactly one term: its `compute_loss_for_module` (generated
    here, bound to that class) calls `super()` and then adds the class's term, so
    several term classes stack, each read, weighted and logged under its own
    namespace. Subclasses implement `compute_loss_term`; they must not override
    `compute_loss_for_module`.
    """

    loss_namespace: ClassVar[str]
    loss_options_class: ClassVar[type[LossTermOptions]] = LossTermOptions

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "loss_namespace" not in cls.__dict__:
            return
        namespace = cls.loss_namespace
        if not isinstance(namespace, str) or not namespace or "/" in namespace:
            raise TypeError(f"{cls.__name__}.loss_namespace must be a non-empty str without '/', got {namespace!r}.")
        if "compute_loss_for_module" in cls.__dict__:
            raise TypeError(
                f"{cls.__name__} sets loss_namespace and overrides compute_loss_for_module; "
                "implement compute_loss_term instead (LossTermMixin adds the term)."
            )

        # Bound to `cls`, not looked up on `self`: with two term classes stacked,
        # `self.loss_namespace` would name the same (most derived) term twice.
        def compute_loss_for_module(
            self: Any, *, module_id: str, config: Any, batch: Any, fwd_out: Any
        ) -> torch.Tensor:
            total = super(cls, self).compute_loss_for_module(
                module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
            )
            options = cls.read_loss_options(config)
            if options.loss_coefficient == 0:
                return total
            term, metrics = cls.compute_loss_term(
                self, module_id=module_id, config=config, batch=batch, fwd_out=fwd_out, options=options
            )
            logged = {"loss": term, **metrics}
            self.metrics.log_dict(
                {f"{namespace}/{name}": value.detach() for name, value in logged.items()},
                key=module_id,
                window=1,
            )
            return total + options.loss_coefficient * term

        cls.compute_loss_for_module = compute_loss_for_module  # type: ignore[method-assign]

    @classmethod
    def read_loss_options(cls, config: Any) -> LossTermOptions:
        """This term's validated options in `config` (an AlgorithmConfig, possibly per module).

        Example (validate early, e.g. when the Learner is built):
            IQNPPOTorchLearner.read_loss_options(algo_config)
        """
        return read_options(config.learner_config_dict, cls.loss_namespace, cls.loss_options_class)

    def compute_loss_term(
        self, *, module_id: str, config: Any, batch: Any, fwd_out: Any, options: LossTermOptions
    ) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
        """Returns the unweighted scalar term and extra metrics (tensors) to log under the namespace."""
        raise NotImplementedError(f"{type(self).__name__} must implement compute_loss_term.")
