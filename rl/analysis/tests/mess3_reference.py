"""Mess3 beliefs written out from ../shared/notes/domain.md section 2 (rl/analysis may not import rl.envs).

    from rl.analysis.tests.mess3_reference import Mess3Contexts, beliefs_after

    beliefs_after(np.array([[0]]))      # [[0.85, 0.075, 0.075]]   (the domain note's reference value)

Edge-emitting form T[k][i, j] = P(token k, next state j | state i) = (y if i == j else x) * (a if k == j else b),
y = 1 - 2x, b = (1 - a) / 2; the belief update is eta' = eta T[k] / (eta T[k] 1) from the uniform
stationary distribution.
"""

from __future__ import annotations

import gymnasium
import numpy as np

X, A = 0.05, 0.85  # Shai et al. 2024's figures


def transition_matrices(x: float = X, a: float = A) -> np.ndarray:
    y, b = 1 - 2 * x, (1 - a) / 2
    return np.array(
        [[[(y if i == j else x) * (a if k == j else b) for j in range(3)] for i in range(3)] for k in range(3)]
    )


def beliefs_after(contexts: np.ndarray) -> np.ndarray:
    """(batch, length) tokens -> (batch, 3) beliefs after the whole context.

    Normalising once at the end equals normalising after every token (the update is linear).
    """
    joint = _joint(contexts)
    return joint / joint.sum(axis=1, keepdims=True)


def context_probabilities(contexts: np.ndarray) -> np.ndarray:
    """P(context) under the stationary process: how often the process itself produces each context."""
    return _joint(contexts).sum(axis=1)


def _joint(contexts: np.ndarray) -> np.ndarray:
    """P(context, current state) from the uniform stationary start."""
    matrices = transition_matrices()
    joint = np.full((len(contexts), 3), 1.0 / 3.0)
    for tokens in np.asarray(contexts).T:
        joint = np.einsum("bi,bij->bj", joint, matrices[tokens])
    return joint


class Mess3Contexts:
    """A ContextAdapter: one-hot tokens in, belief after the context out."""

    name = f"mess3(x={X},a={A})"
    num_tokens = 3
    target_name = "belief"

    def observations(self, contexts: np.ndarray) -> np.ndarray:
        return np.eye(3, dtype=np.float32)[contexts]

    def targets(self, contexts: np.ndarray) -> np.ndarray:
        return beliefs_after(contexts)


class Mess3TokenEnv(gymnasium.Env):
    """The passive Mess3 process as an environment: observe each emitted token (one-hot), act freely.

    The hidden state starts from the stationary (uniform) distribution; reset emits the first
    token. Actions do not matter and earn nothing; episodes are truncated after `horizon` tokens.
    """

    observation_space = gymnasium.spaces.Box(0.0, 1.0, (3,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, config):  # RLlib passes env_config: {"horizon": int}
        self.horizon = config["horizon"]
        self._matrices = transition_matrices()

    def _emit(self):
        joint = self._matrices[:, self.state, :]  # (token, next state) given the current state
        token, self.state = divmod(int(self.np_random.choice(9, p=joint.ravel())), 3)
        self.belief = self.belief @ self._matrices[token]
        self.belief /= self.belief.sum()
        self.tokens += 1
        return np.eye(3, dtype=np.float32)[token]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state, self.belief, self.tokens = int(self.np_random.integers(3)), np.full(3, 1 / 3), 0
        return self._emit(), {}

    def step(self, action):
        return self._emit(), 0.0, False, self.tokens > self.horizon, {}


class Mess3Env:
    """An EnvAdapter for Mess3TokenEnv."""

    name = f"mess3_tokens(x={X},a={A})"

    def __init__(self, horizon: int):
        self.horizon = horizon

    def make_env(self):
        return Mess3TokenEnv({"horizon": self.horizon})

    def diagnostics(self, env, info):
        return {"belief": env.belief.copy(), "hidden_state": np.array(env.state)}
