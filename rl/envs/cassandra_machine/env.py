"""CassandraMachineEnv: the machine-maintenance POMDP with a factored exact belief.

    env = CassandraMachineEnv(observation="marginals", episode_length=1000)
    env = gymnasium.make("rl/CassandraMachine-v0", observation="belief")  # registered on import
    observation, info = env.reset(seed=0)     # info["belief"]: (256,) float64, info["state"]

Observation modes: "symbol" (the file's 0..15, plus 16 = nothing observed yet), "belief" (256
probabilities), "marginals" (4x4: row k is the distribution of component k's condition,
columns broken/bad/fair/good), "state" (debugging). See README.md.
"""

from __future__ import annotations

import gymnasium
import numpy as np

from rl.envs.cassandra_machine import model
from rl.envs.pomdp.env import POMDPEnv


class CassandraMachineEnv(POMDPEnv):
    """POMDPEnv over the exact machine model whose belief prediction uses the Kronecker structure."""

    OBSERVATION_MODES = (*POMDPEnv.OBSERVATION_MODES, "marginals")

    def __init__(self, *, observation: str = "symbol", episode_length: int = 1000):
        super().__init__(model.machine_pomdp(decimals=None), episode_length=episode_length, observation=observation)

    def _observation_space(self, mode: str) -> gymnasium.spaces.Space:
        if mode == "marginals":
            return gymnasium.spaces.Box(0.0, 1.0, shape=(model.NUM_COMPONENTS, len(model.CONDITIONS)), dtype=np.float32)
        return super()._observation_space(mode)

    def _observe(self, mode: str, symbol: int):
        if mode == "marginals":
            return model.component_marginals(self._belief).astype(np.float32)
        return super()._observe(mode, symbol)

    def predict_belief(self, belief: np.ndarray, action: int) -> np.ndarray:
        return model.predict_belief(belief, action)


ENV_ID = "rl/CassandraMachine-v0"


def register_envs() -> None:
    """Registers ENV_ID with Gymnasium (keyword arguments of gymnasium.make reach the constructor)."""
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point=CassandraMachineEnv)
