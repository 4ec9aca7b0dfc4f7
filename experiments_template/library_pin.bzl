"""The rl-harness revision this repository builds against.

Upgrade the pin: set RL_HARNESS_COMMIT to the new commit, run the tests, commit.
Every run's provenance records the revision actually used (docs/multi_repo.md).
Develop the library side by side instead: `export RL_HARNESS_LOCAL_PATH=/path/to/rl-harness`.
"""

RL_HARNESS_REMOTE = "https://example.invalid/your-org/rl-harness.git"  # your library remote
RL_HARNESS_COMMIT = "0000000000000000000000000000000000000000"  # a full commit id
