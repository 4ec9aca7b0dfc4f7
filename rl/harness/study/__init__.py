"""Studies: agents x training seeds run as ordinary runs, recorded together and summarised with intervals.

    from rl.harness.study import Score, Study     # declare one in a module: STUDY = Study(...)

    rl-harness study <module> [--smoke]           # rl/harness/commands/study.py runs it (docs/harness.md)
    rl-harness study plan <study-id> --width 0.4 --results-dir DIR   # the seeds an interval that wide needs
"""

from rl.harness.study.declaration import Member, Score, Study

__all__ = ["Member", "Score", "Study"]
