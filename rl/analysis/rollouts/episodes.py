"""Process-weighted rollouts: a policy plays an environment, recording its residual stream each step.

    from rl.analysis.rollouts import collect_rollouts

    rollouts = collect_rollouts(module, ControlledMess3Env(), num_episodes=256, max_steps=64,
                                seed=context.seeds.sequence("probe/rollouts"), batch_size=64,
                                policy="run <run-id> iter_000010")
    rollouts.activations["residual_2"]       # (episodes, max_steps, d_model), zero past each length
    rollouts.activations["critic_encoder/residual_2"]   # a separate critic encoder's, if the module has one
    rollouts.diagnostics["belief"]           # (episodes, max_steps, 3): what the adapter reported
    dataset = rollouts.probe_dataset("belief")   # valid steps only; one group per episode

Step t holds the observation the policy acted on, its residual stream, the action, the reward
that action earned, and the diagnostics reported with that observation (after reset for t=0,
after step t-1 otherwise). `batch_size` environments run in lockstep; every episode starts from
`reset(seed=...)` with its own seed from the `seed` sequence, and actions are sampled with a torch
generator seeded from it too, so a rollout is reproducible and, with one seed sequence for every
checkpoint, each checkpoint meets the same reset seeds. The module must be in eval mode (load_rl_module does it).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule

from rl.analysis.activations import layer_activations
from rl.analysis.adapters import EnvAdapter
from rl.analysis.modules import encoder_names, residual_stream
from rl.analysis.probes import ProbeDataset, SamplingDistribution
from rl.analysis.progress import ProgressBar
from rl.analysis.seeds import child_stream, describe


@dataclasses.dataclass(frozen=True)
class Rollouts:
    lengths: np.ndarray  # (episodes,): steps the policy acted in each episode
    observations: np.ndarray  # (episodes, max_steps, obs_dim)
    actions: np.ndarray  # (episodes, max_steps, *action_shape)
    rewards: np.ndarray  # (episodes, max_steps)
    activations: Mapping[str, np.ndarray]  # layer -> (episodes, max_steps, d_model)
    diagnostics: Mapping[str, np.ndarray]  # name -> (episodes, max_steps, ...)
    distribution: SamplingDistribution

    def valid(self) -> np.ndarray:
        """(episodes, max_steps) mask of the steps that happened."""
        return np.arange(self.observations.shape[1]) < self.lengths[:, None]

    def probe_dataset(self, target: str) -> ProbeDataset:
        if target not in self.diagnostics:
            raise KeyError(f"no diagnostic {target!r}; the env adapter reported {sorted(self.diagnostics)}")
        valid = self.valid()
        targets = self.diagnostics[target][valid]
        return ProbeDataset(
            activations={name: values[valid] for name, values in self.activations.items()},
            targets=targets.reshape(len(targets), -1).astype(np.float64),
            groups=np.broadcast_to(np.arange(len(self.lengths))[:, None], valid.shape)[valid],
            distribution=self.distribution,
            target_name=target,
        )


def collect_rollouts(
    module: RLModule,
    env: EnvAdapter,
    *,
    num_episodes: int,
    max_steps: int,
    seed: np.random.SeedSequence,
    batch_size: int,
    policy: str,
    stochastic: bool = True,
    record_activations: bool = True,
    show_progress: bool = True,
) -> Rollouts:
    """Plays `num_episodes` episodes of at most `max_steps` steps (see the module docstring).

    With `record_activations=False` it only plays (evaluation: rewards, actions, diagnostics), so
    any actor-critic module will do, MLPModel included, and `activations` is empty.
    """
    if record_activations and not callable(getattr(module, "residual_stream", None)):
        raise ValueError(
            f"{type(module).__name__} exposes no residual stream to probe (only TransformerModel does); "
            "collect rollouts with a TransformerModel, or pass record_activations=False to evaluate it"
        )
    for name, value in (("num_episodes", num_episodes), ("max_steps", max_steps), ("batch_size", batch_size)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    reset_seeds = child_stream(seed, "env_resets").generate_state(num_episodes).tolist()
    batches = []
    with (
        ProgressBar(
            total=-(-num_episodes // batch_size) * max_steps, label=f"rollouts in {env.name}", enabled=show_progress
        ) as bar,
        torch.random.fork_rng(devices=[]),
    ):
        # RLlib's action distributions sample from torch's global generator: seed it, restore it after.
        torch.manual_seed(int(child_stream(seed, "actions").generate_state(1)[0]))
        for start in range(0, num_episodes, batch_size):
            batches.append(
                _play(
                    module, env, reset_seeds[start : start + batch_size], max_steps, stochastic, record_activations, bar
                )
            )
    return Rollouts(
        **_concatenate(batches),
        distribution=SamplingDistribution.process_rollouts(
            env=env.name,
            policy=policy,
            num_episodes=num_episodes,
            max_steps=max_steps,
            seed_stream=json.dumps(describe(seed)),
            action_sampling="stochastic" if stochastic else "greedy",
        ),
    )


def _play(module, adapter, seeds, max_steps, stochastic, record_activations, bar) -> dict[str, Any]:
    """One lockstep batch of episodes; arrays are padded to max_steps."""
    envs = [adapter.make_env() for _ in seeds]
    observations, diagnostics = [], []
    for env, seed in zip(envs, seeds):
        obs, info = env.reset(seed=int(seed))
        observations.append(obs)
        diagnostics.append(adapter.diagnostics(env, info))
    batch = len(envs)
    record = _Recorder(batch, max_steps)
    state = _batched(module.get_initial_state(), batch)
    active = np.ones(batch, dtype=bool)
    forward = module.forward_exploration if stochastic else module.forward_inference
    action_distribution = (
        module.get_exploration_action_dist_cls() if stochastic else module.get_inference_action_dist_cls()
    )
    for step in range(max_steps):
        obs = torch.as_tensor(np.stack(observations).astype(np.float32))[:, None]
        with torch.no_grad():
            out = forward({Columns.OBS: obs, Columns.STATE_IN: state})
            activations = _step_activations(module, obs, state) if record_activations else {}
        distribution = action_distribution.from_logits(out[Columns.ACTION_DIST_INPUTS][:, 0])
        if not stochastic:
            distribution = distribution.to_deterministic()
        actions = distribution.sample().numpy()
        record.step(
            step,
            active,
            np.stack(observations),
            actions,
            activations,
            {key: np.stack([np.asarray(d[key]) for d in diagnostics]) for key in diagnostics[0]},
        )
        for index in np.flatnonzero(active):
            obs, reward, terminated, truncated, info = envs[index].step(actions[index])
            record.rewards[index, step] = reward
            record.lengths[index] = step + 1
            observations[index], diagnostics[index] = obs, adapter.diagnostics(envs[index], info)
            active[index] = not (terminated or truncated)
        state = out.get(Columns.STATE_OUT, state)  # stateless modules (MLP) return none
        bar.advance()
        if not active.any():
            bar.advance(max_steps - step - 1)
            break
    for env in envs:
        env.close()
    return record.as_dict()


def _step_activations(module, obs, state) -> dict[str, np.ndarray]:
    """Every encoder's residual stream at this step (its state: the step's STATE_IN), layers named by encoder."""
    activations = {}
    for encoder in encoder_names(module):
        stream = residual_stream(module, obs, state[encoder], encoder).activations[:, :, 0]
        activations.update(layer_activations(stream, encoder))
    return activations


class _Recorder:
    """Padded per-step arrays, allocated on the first step when the shapes are known."""

    def __init__(self, batch: int, max_steps: int):
        self.batch, self.max_steps = batch, max_steps
        self.lengths = np.zeros(batch, dtype=np.int64)
        self.rewards = np.zeros((batch, max_steps))
        self.arrays: dict[str, dict[str, np.ndarray]] = {"main": {}, "activations": {}, "diagnostics": {}}

    def step(self, step, active, observations, actions, activations, diagnostics) -> None:
        for section, values in (
            ("main", {"observations": observations, "actions": actions}),
            ("activations", activations),
            ("diagnostics", diagnostics),
        ):
            for name, value in values.items():
                if name not in self.arrays[section]:
                    self.arrays[section][name] = np.zeros((self.batch, self.max_steps, *value.shape[1:]), value.dtype)
                self.arrays[section][name][active, step] = value[active]

    def as_dict(self) -> dict[str, Any]:
        return {
            "lengths": self.lengths,
            "rewards": self.rewards,
            **self.arrays["main"],
            "activations": self.arrays["activations"],
            "diagnostics": self.arrays["diagnostics"],
        }


def _concatenate(batches: list[dict]) -> dict:
    """Joins the per-batch dicts (nested dicts of arrays) along the episode axis."""
    return {
        key: _concatenate([b[key] for b in batches])
        if isinstance(value, dict)
        else np.concatenate([b[key] for b in batches])
        for key, value in batches[0].items()
    }


def _batched(state: Any, batch: int) -> Any:
    """The module's initial state (nested dicts of arrays without batch axis) with a batch axis."""
    if isinstance(state, Mapping):
        return {key: _batched(value, batch) for key, value in state.items()}
    tensor = torch.as_tensor(state)
    return tensor.expand(batch, *tensor.shape).clone()
