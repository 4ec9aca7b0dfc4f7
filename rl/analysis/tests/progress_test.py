import io

from rl.analysis.progress import ProgressBar


def test_a_log_gets_one_line_per_tenth():
    stream = io.StringIO()
    with ProgressBar(total=100, label="contexts", stream=stream) as bar:
        for _ in range(100):
            bar.advance()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11 and lines[-1].startswith("contexts [" + "#" * 30 + "] 100% 100/100")
