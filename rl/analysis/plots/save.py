"""Figures are saved as PNG with the Agg renderer, atomically.

    from rl.analysis.plots import save_figure
    save_figure(figure, "results/<run-id>/belief_simplex.png")

Figures here are built with `matplotlib.figure.Figure`, never pyplot, so no global backend
state is touched and nothing needs a display.
"""

from __future__ import annotations

import os
import tempfile

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def save_figure(figure: Figure, path: str) -> None:
    """Renders with Agg to PNG, atomically (temp file in the same folder, then os.replace)."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".png")
    os.close(handle)
    try:
        FigureCanvasAgg(figure).print_png(temporary)
        os.chmod(temporary, 0o644)  # mkstemp creates 0600; a results PNG is for everyone to read
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
