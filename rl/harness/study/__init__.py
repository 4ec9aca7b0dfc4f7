"""Studies: agents x training seeds run as ordinary runs, recorded together and summarised with intervals.

from rl.harness.study import Score, Study     # declare one in a module: STUDY = Study(...)

rl-harness study <module> [--smoke]           # rl/harness/commands/study.py runs it (docs/harness.md)
rl-harness study plan <study-id> --width 0.4 --results-dir DIR   # the seeds an interval that wide needs
"""

from rl.harness.study.declaration import Member, Score, Study
from rl.harness.study.record import COMPLETED, StudyRecord, find_study, study_folder
from rl.harness.study.statistics import mean_interval, mean_interval_or_point

# `summary` (a study's summary and figures) and `statistics` are imported by their names.
__all__ = [
    "COMPLETED",
    "Member",
    "Score",
    "Study",
    "StudyRecord",
    "find_study",
    "mean_interval",
    "mean_interval_or_point",
    "statistics",
    "study_folder",
    "summary",
]
