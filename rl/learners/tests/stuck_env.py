"""CartPole whose step never returns from a given step on: an env stuck in a call that does not come back.

    config.environment(CartPoleStuckAfter, env_config={"steps": 1500})   # steps 0..1499 return

In a module of its own so that a remote EnvRunner can import the class (a test module is not importable there).
"""

import threading

import gymnasium as gym


class CartPoleStuckAfter(gym.Wrapper):
    """CartPole-v1 counting its steps over episodes; the `env_config["steps"]`-th and every later one block for good."""

    def __init__(self, env_config: dict):
        super().__init__(gym.make("CartPole-v1"))
        self._left = env_config["steps"]

    def step(self, action):
        self._left -= 1
        if self._left < 0:
            threading.Event().wait()
        return self.env.step(action)
