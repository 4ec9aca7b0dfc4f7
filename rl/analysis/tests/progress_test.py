import io

import pytest

from rl.analysis import progress
from rl.analysis.progress import ProgressBar


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_a_short_stage_in_a_log_is_one_line():
    stream = io.StringIO()
    with ProgressBar(total=100, label="contexts", stream=stream) as bar:
        for _ in range(100):
            bar.advance()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("contexts [" + "#" * 30 + "] 100% 100/100")


def test_a_long_stage_in_a_log_shows_a_line_per_tenth_at_most_and_only_after_a_pause(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    stream = io.StringIO()
    with ProgressBar(total=100, label="episodes", stream=stream) as bar:
        for step in range(100):
            clock.now += progress.LOG_EVERY_S / 5  # a tenth of the work takes two pauses
            bar.advance()
    lines = stream.getvalue().splitlines()
    # a line when a tenth is crossed and LOG_EVERY_S have passed: every 5th step, but at most one per tenth
    assert [line.split("%")[0].split()[-1] for line in lines] == [
        "5",
        "10",
        "20",
        "30",
        "40",
        "50",
        "60",
        "70",
        "80",
        "90",
        "100",
    ]


@pytest.mark.parametrize("done", [0, 37])
def test_a_stage_that_stops_early_in_a_log_says_how_far_it_got(done):
    stream = io.StringIO()
    with pytest.raises(KeyboardInterrupt), ProgressBar(total=100, label="contexts", stream=stream) as bar:
        bar.advance(done)
        raise KeyboardInterrupt
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and f" {done}/100 " in lines[0]
