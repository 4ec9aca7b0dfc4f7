"""PPGConfig: Phasic Policy Gradient (Cobbe et al. 2020) as a PPO configuration.

    from rl.learners import PPGConfig

    config = (
        PPGConfig()
        .environment("CartPole-v1")
        .training(
            policy_iterations_per_aux=32, aux_epochs=6, aux_minibatch_size=8192,
            aux_lr=3e-4, beta_clone=1.0, aux_value_loss_coeff=0.01,
            aux_true_value_loss_coeff=0.01,
        )
    )
    algo = config.build_algo()          # or tune.Tuner(config.algo_class, param_space=config)

PPG is PPO whose Learner (PPGTorchLearner) runs an auxiliary phase after every
`policy_iterations_per_aux` training iterations; the algorithm, EnvRunners and
training loop are PPO's, so everything that runs PPO runs PPG. The default module
is PPGMLPModel with `vf_share_layers=True` (the detach design); bring your own with
`class M(PPGAuxiliaryValueHead, TransformerModel): pass`. Settings validate in
`validate()` (build_algo, Tune) and again when the Learner is built (build_learner).
"""

from __future__ import annotations

from typing import Any

from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.algorithms.ppo import PPO, PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rl.learners.ppg.defaults import PPG_DEFAULTS, validate_ppg_config


class PPGConfig(PPOConfig):
    """PPOConfig plus PPG's auxiliary-phase settings (see the module docstring).

    Attributes (set with `.training(...)`):
        policy_iterations_per_aux: training iterations (PPO updates) between auxiliary phases (N_pi).
        aux_epochs: passes over the buffered batches in an auxiliary phase (E_aux).
        aux_minibatch_size: env steps per auxiliary gradient step (a multiple of max_seq_len for
            stateful modules; a buffered batch smaller than it is one minibatch).
        aux_lr: learning rate of the auxiliary phase's own Adam optimizer.
        beta_clone: weight of KL(pi_frozen || pi), pi_frozen = the policy when the phase starts.
        aux_value_loss_coeff: weight of 0.5 * (V_aux - V_targ)^2 (reward-scale dependent).
        aux_true_value_loss_coeff: weight of 0.5 * (V - V_targ)^2 in the auxiliary phase.
    """

    def __init__(self, algo_class: type | None = None):
        super().__init__(algo_class=algo_class or PPG)
        for name, value in PPG_DEFAULTS.items():
            setattr(self, name, value)

    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from rl.learners.ppg.module import PPGMLPModel

        return RLModuleSpec(module_class=PPGMLPModel)

    def get_default_learner_class(self) -> type:
        from rl.learners.ppg.learner import PPGTorchLearner

        return PPGTorchLearner

    @property
    def _model_config_auto_includes(self) -> dict[str, Any]:
        # PPO writes vf_share_layers=False; the detach design needs one shared encoder.
        return super()._model_config_auto_includes | {"vf_share_layers": True}

    def training(
        self,
        *,
        policy_iterations_per_aux: int = NotProvided,
        aux_epochs: int = NotProvided,
        aux_minibatch_size: int = NotProvided,
        aux_lr: float = NotProvided,
        beta_clone: float = NotProvided,
        aux_value_loss_coeff: float = NotProvided,
        aux_true_value_loss_coeff: float = NotProvided,
        **kwargs: Any,
    ) -> PPGConfig:
        super().training(**kwargs)
        given = {
            "policy_iterations_per_aux": policy_iterations_per_aux,
            "aux_epochs": aux_epochs,
            "aux_minibatch_size": aux_minibatch_size,
            "aux_lr": aux_lr,
            "beta_clone": beta_clone,
            "aux_value_loss_coeff": aux_value_loss_coeff,
            "aux_true_value_loss_coeff": aux_true_value_loss_coeff,
        }
        for name, value in given.items():
            if value is not NotProvided:
                setattr(self, name, value)
        return self

    def validate(self) -> None:
        super().validate()
        validate_ppg_config(self)


class PPG(PPO):
    """PPO's algorithm with PPGConfig as its default config (the phases live in PPGTorchLearner)."""

    @classmethod
    def get_default_config(cls) -> PPGConfig:
        return PPGConfig()
