"""PPG's auxiliary-phase defaults (the paper's) and one validation of a config.

    from rl.learners.ppg.defaults import PPG_DEFAULTS, validate_ppg_config

    validate_ppg_config(config)   # ValueError naming the setting and the fix

PPGConfig.validate and PPGTorchLearner.build both call it; neither imports the other for it.
"""

from __future__ import annotations

from typing import Any

from rl.learners.models.config import require_positive_int
from rl.losses import require_number

# Paper defaults (domain notes section 4): N_pi = 32, E_aux = 6, beta_clone = 1, aux lr = 5e-4;
# both auxiliary value losses have weight 1 in the paper. The aux minibatch is in env steps.
PPG_DEFAULTS = {
    "policy_iterations_per_aux": 32,
    "aux_epochs": 6,
    "aux_minibatch_size": 1024,
    "aux_lr": 5e-4,
    "beta_clone": 1.0,
    "aux_value_loss_coeff": 1.0,
    "aux_true_value_loss_coeff": 1.0,
}
POSITIVE_INTS = ("policy_iterations_per_aux", "aux_epochs", "aux_minibatch_size")
COEFFICIENTS = ("beta_clone", "aux_value_loss_coeff", "aux_true_value_loss_coeff")


def validate_ppg_config(config: Any) -> None:
    """Raises ValueError naming the setting and the fix if `config` (a PPGConfig) cannot run PPG."""
    if config.framework_str != "torch":
        raise ValueError(
            f"PPG runs on torch only, got framework {config.framework_str!r}; use config.framework('torch')."
        )
    if not config.enable_rl_module_and_learner or not config.enable_env_runner_and_connector_v2:
        raise ValueError(
            "PPG needs RLlib's new API stack (RLModule, Learner, ConnectorV2): call "
            "config.api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)."
        )
    if config.num_learners > 1:
        raise ValueError(
            f"PPG supports one Learner (local or remote), got num_learners={config.num_learners}. Each Learner "
            "buffers its own batches and runs the auxiliary phase outside Learner.update, with its own unregistered "
            "optimizer, so DDP would neither all-reduce the auxiliary gradients (the replicas would drift apart) "
            "nor guarantee equal step counts (unequal buffers deadlock the collectives). Set config.learners("
            "num_learners=0) or 1, and scale sampling with num_env_runners instead."
        )
    if not config.use_critic:
        raise ValueError("PPG trains value heads and needs GAE's value targets: set config.training(use_critic=True).")
    checks = [(name, require_positive_int, {}) for name in POSITIVE_INTS]
    checks += [(name, require_number, {"minimum": 0.0, "inclusive": True}) for name in COEFFICIENTS]
    checks += [("aux_lr", require_number, {"minimum": 0.0, "inclusive": False})]
    for name, check, bounds in checks:
        try:
            check(name, getattr(config, name), **bounds)
        except ValueError as error:
            raise ValueError(f"PPG: {error} Set config.training({name}=...), e.g. {PPG_DEFAULTS[name]}.") from error
    value_losses_on = config.aux_value_loss_coeff > 0 or config.aux_true_value_loss_coeff > 0
    if value_losses_on and config.beta_clone == 0:
        raise ValueError(
            "PPG: beta_clone must be > 0 while an auxiliary value loss is on: without the cloning KL the "
            "auxiliary phase moves the shared encoder, and so the policy, freely. Set beta_clone (1.0 in the paper) "
            "or both aux value coefficients to 0."
        )
