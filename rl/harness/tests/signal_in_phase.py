"""Runs the harness CLI with a signal sent from inside one phase of the run (tests/runners_phases_test.py).

    python -m rl.harness.tests.signal_in_phase <phase> <SIGTERM|SIGINT> <CLI arguments...>

Each phase's call is wrapped so that this process signals itself within it: the run then meets
the signal exactly there, as a user's Ctrl-C or a scheduler's SIGTERM would. One process per run,
because Ray cannot start again in a process whose SIGTERM went through Ray's C++ handler.
"""

import os
import signal
import sys

import ray
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

from rl.harness.commands import cli
from rl.harness.run import session


def _signalling(function, signal_number, *, after):
    """`function` that signals this process in its first call, before or after the real work."""
    calls = []

    def wrapper(*args, **kwargs):
        first = not calls
        calls.append(1)
        if first and not after:
            os.kill(os.getpid(), signal_number)  # handled on the main thread before the next line runs
        value = function(*args, **kwargs)
        if first and after:
            os.kill(os.getpid(), signal_number)
        return value

    return wrapper


# phase -> (owner, attribute, signal after the real call rather than before)
PHASES = {
    "start-up": (session.RunSession, "start", True),  # the records exist; the recipe is about to run
    "ray.init": (ray, "init", True),  # Ray is up (it would have taken SIGTERM by now), ray.init not returned
    "building the algorithm": (AlgorithmConfig, "build_algo", False),
    "training": (Algorithm, "train", False),
    "checkpointing": (Algorithm, "save_to_path", False),
    # Training is over and Ray shut down: where a recipe's later stages (scoring, probing) run.
    "after training": (session.RunSession, "set_summary_section", False),
}


def main(argv):
    phase, signal_name, *cli_args = argv
    owner, attribute, after = PHASES[phase]
    setattr(owner, attribute, _signalling(getattr(owner, attribute), signal.Signals[signal_name], after=after))
    return cli.main(["rl-harness", *cli_args])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
