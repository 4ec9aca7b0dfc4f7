"""control_references: hand-computed values on a 2-state toy, the ordering and an env rollout on Mess3, bad input.

The toy: a hidden state that never changes (prior 1/2, 1/2) emits its own token with probability
0.8. Action 1 bets on state 0 (+1 in state 0, -1/2 in state 1), action 0 abstains (0). Over 3
steps the gain of betting at belief b is 1.5 b - 0.5, and with the likelihood ratio 4 a token
gives, the best bets after n tokens earn, in expectation (each history counted once):
  n = 0: 0.25;  n = 1: 0.35 (bet after token 0 only);  n = 2: 0.31 (tokens 00) + 2 * 0.04 (01, 10) = 0.39.
- fully observed: bet exactly in state 0: 0.5 per step.
- belief-optimal: 0.25 + 0.35 g + 0.39 g^2.
- memoryless on (last token, previous action): bet first; then bet after (0, bet) and after
  (0, abstain), abstain after (1, bet) and (1, abstain). It loses only the history 01 at the last
  step (seen as (1, bet), which at step 1 means "token 1": abstain): 0.25 + 0.35 g + 0.35 g^2.
- open loop: always bet, 0.25 per step; passive (always abstain): 0.
"""

import gymnasium
import numpy as np
import pytest

from rl.envs.hmm import FiniteHMM, HMMEnv
from rl.envs.hmm.tasks import OccupancyControl
from rl.envs.mess3 import CONTROL_DEFAULTS, mess3_env, mess3_process
from rl.envs.solvers import control_references, hmm_control

TOY_GAMMA = 0.5


class BetOnStateZero:
    """The toy of the module docstring, as an HMMEnv task."""

    def __init__(self):
        self.model = FiniteHMM.from_state_emitting(np.eye(2), [[0.8, 0.2], [0.2, 0.8]], emitted_by="destination")
        self.action_space = gymnasium.spaces.Discrete(2)
        self.dynamics = (self.model, self.model)

    def reward(self, action, state, token, next_state):
        value = 0.0 if action == 0 else (1.0 if state == 0 else -0.5)
        return value, {"bet": value}


def _discounted(per_step, gamma):
    return sum(gamma**step * reward for step, reward in enumerate(per_step))


TOY_PER_STEP = {
    "fully_observed": [0.5, 0.5, 0.5],
    "belief_optimal": [0.25, 0.35, 0.39],
    "memoryless": [0.25, 0.35, 0.35],
    "open_loop": [0.25, 0.25, 0.25],
    "passive": [0.0, 0.0, 0.0],
}


@pytest.fixture(scope="module")
def toy_references():
    return control_references(BetOnStateZero(), horizon=3, gamma=TOY_GAMMA, prior=[0.5, 0.5], value_tolerance=1e-6)


@pytest.mark.parametrize("name", list(TOY_PER_STEP))
def test_toy_references_match_the_hand_values(toy_references, name):
    reference = getattr(toy_references, name)
    # every optimal policy here is myopic (actions do not move the state), so the same for both criteria
    assert reference.value == pytest.approx(_discounted(TOY_PER_STEP[name], TOY_GAMMA), abs=1e-6)
    assert reference.episode_return == pytest.approx(sum(TOY_PER_STEP[name]), abs=1e-6)
    assert reference.seconds >= 0.0


def test_expected_rewards_are_the_hand_values(toy_references):
    # abstain earns 0; betting earns +1 in state 0 and -1/2 in state 1 (module docstring)
    np.testing.assert_allclose(toy_references.expected_rewards, [[0.0, 0.0], [1.0, -0.5]], atol=1e-12)


def test_toy_belief_optimal_bracket_and_memoryless_search(toy_references):
    best = toy_references.belief_optimal
    exact = _discounted(TOY_PER_STEP["belief_optimal"], TOY_GAMMA)
    assert best.value <= exact + 1e-12 <= best.upper_bound + 2e-12  # a policy's value, a grid upper bound
    assert best.error_bound <= 1e-6
    assert toy_references.memoryless_exhaustive
    # the hand-found policy: first bet; bet after (token 0, either action), abstain after token 1
    policy = toy_references.memoryless.policy
    assert [policy.action(None, None)] + [policy.action(t, a) for a in (0, 1) for t in (0, 1)] == [1, 1, 0, 1, 0]
    assert toy_references.memory_gap_ratio() == pytest.approx(0.04 * TOY_GAMMA**2 / exact)


def test_coordinate_ascent_finds_the_toy_memoryless_optimum(monkeypatch):
    monkeypatch.setattr(hmm_control, "EXHAUSTIVE_MEMORYLESS_LIMIT", 0)
    references = control_references(BetOnStateZero(), horizon=3, gamma=TOY_GAMMA, prior=[0.5, 0.5])
    assert not references.memoryless_exhaustive
    assert references.memoryless.value == pytest.approx(_discounted(TOY_PER_STEP["memoryless"], TOY_GAMMA), abs=1e-12)


# -- Mess3 -----------------------------------------------------------------------------------------

HORIZON = 64
# The earlier defaults, where the belief is worth almost nothing (rl/envs/README.md), beside
# CONTROL_DEFAULTS, where all of the control gain needs it.
EARLIER_DEFAULTS = {**CONTROL_DEFAULTS, "tilt_strength": 2.0, "kl_coefficient": 1.0}


def _mess3_task(**settings):
    return OccupancyControl(mess3_process(), **{**CONTROL_DEFAULTS, **settings})


@pytest.mark.parametrize("settings", [CONTROL_DEFAULTS, EARLIER_DEFAULTS], ids=["defaults", "earlier_defaults"])
@pytest.mark.parametrize("gamma", [0.9, 1.0])
def test_mess3_references_are_ordered(settings, gamma):
    references = control_references(_mess3_task(**settings), horizon=HORIZON, gamma=gamma)
    best = references.belief_optimal
    round_off = 1e-9
    assert references.fully_observed.value >= best.upper_bound - round_off
    assert best.upper_bound >= best.value >= references.memoryless.value - round_off
    assert references.memoryless.value >= references.open_loop.value >= references.passive.value
    assert best.error_bound <= 1e-3  # the default value_tolerance
    if gamma == 1.0:
        assert best.value == best.episode_return


def test_mess3_rollout_earns_the_belief_optimal_value():
    """The controller run in HMMEnv (3000 episodes, about 4 s) earns its exact values within 4 standard errors.

    The env draws tokens and rewards itself (from the task), so this checks the references' model of both.
    """
    gamma, episodes = 0.9, 3000
    references = control_references(_mess3_task(), horizon=HORIZON, gamma=gamma)
    best = references.belief_optimal
    controller = best.policy
    env = mess3_env("control", episode_length=HORIZON)
    rng = np.random.default_rng(0)
    discounts = gamma ** np.arange(HORIZON)
    discounted, undiscounted = np.empty(episodes), np.empty(episodes)
    for episode in range(episodes):
        env.reset(seed=episode)
        node = controller.start(rng)
        rewards = np.empty(HORIZON)
        for step in range(HORIZON):
            action = controller.action(node, step)
            _, rewards[step], _, _, info = env.step(action)
            node = controller.advance(node, action, info["token"], rng)
        discounted[episode], undiscounted[episode] = discounts @ rewards, rewards.sum()
    for samples, exact in ((discounted, best.value), (undiscounted, best.episode_return)):
        standard_error = samples.std(ddof=1) / np.sqrt(episodes)
        assert abs(samples.mean() - exact) < 4 * standard_error, (samples.mean(), standard_error, exact)
    # the optimum lies within error_bound above the controller's value, well inside the sampling error
    assert best.error_bound < np.std(discounted) / np.sqrt(episodes)


class FirstActions:
    """A task restricted to its first `count` actions (Mess3's: passive, tilt to 0, tilt to 1)."""

    def __init__(self, task, count):
        self.model, self._task = task.model, task
        self.action_space = gymnasium.spaces.Discrete(count)
        self.dynamics = task.dynamics[:count]

    def reward(self, action, state, token, next_state):
        return self._task.reward(action, state, token, next_state)


def test_coordinate_ascent_reaches_the_exhaustive_optimum_on_mess3_with_three_actions(monkeypatch):
    """3^10 memoryless maps: few enough to search them all (about 5 s), and the coordinate ascent agrees."""
    task = FirstActions(_mess3_task(tilt_strength=2.0, kl_coefficient=5.0), 3)
    exhaustive = control_references(task, horizon=HORIZON, gamma=0.9)
    monkeypatch.setattr(hmm_control, "EXHAUSTIVE_MEMORYLESS_LIMIT", 0)
    ascent = control_references(task, horizon=HORIZON, gamma=0.9)
    assert exhaustive.memoryless_exhaustive and not ascent.memoryless_exhaustive
    assert exhaustive.memoryless.value > exhaustive.open_loop.value + 0.05  # not just the best constant
    assert ascent.memoryless.value == pytest.approx(exhaustive.memoryless.value, abs=1e-12)


# -- bad input -------------------------------------------------------------------------------------


def test_bad_input_is_rejected_with_the_fix():
    task = _mess3_task()
    with pytest.raises(ValueError, match="HMMEnv is not a finite HMM control task; pass an HMMEnv task"):
        control_references(HMMEnv(task, episode_length=4), horizon=4, gamma=0.9)
    with pytest.raises(ValueError, match="str is not a finite HMM control task"):
        control_references("rl/Mess3Control-v0", horizon=4, gamma=0.9)
    for gamma in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match=f"gamma={gamma}; expected a discount in \\(0, 1\\]"):
            control_references(task, horizon=4, gamma=gamma)
    with pytest.raises(ValueError, match="horizon=0; expected the episode length"):
        control_references(task, horizon=0, gamma=0.9)
    with pytest.raises(ValueError, match="action 1's dynamics differ from task.model; pass as passive_action"):
        control_references(task, horizon=4, gamma=0.9, passive_action=1)
    with pytest.raises(ValueError, match="resolution 2 brackets .* > value_tolerance=1e-06; raise grid_resolution"):
        control_references(
            BetOnStateZero(), horizon=3, gamma=0.5, prior=[0.5, 0.5], value_tolerance=1e-6, grid_resolution=2
        )
    with pytest.raises(ValueError, match="points > max_grid_points=100; raise max_grid_points"):
        control_references(task, horizon=4, gamma=0.9, max_grid_points=100)
    with pytest.raises(ValueError, match="value_tolerance=0; expected a positive width"):
        control_references(task, horizon=4, gamma=0.9, value_tolerance=0)
