"""Figures are saved as PNG with the Agg renderer, atomically.

    from rl.analysis.plots import figure_png, save_figure
    save_figure(figure, "results/<run-id>/belief_simplex.png")
    context.write_output("belief_simplex.png", figure_png(figure))   # a run's output, in its manifest

Figures here are built with `matplotlib.figure.Figure`, never pyplot, so no global backend
state is touched and nothing needs a display.
"""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rl.harness.run import records


def save_figure(figure: Figure, path: str) -> None:
    """Renders with Agg to PNG, atomically (records.write_file_atomically: temp file, then os.replace)."""
    records.write_file_atomically(path, FigureCanvasAgg(figure).print_png)


def figure_png(figure: Figure) -> bytes:
    """The figure as PNG bytes (the same Agg rendering as save_figure), for RunContext.write_output."""
    buffer = io.BytesIO()
    FigureCanvasAgg(figure).print_png(buffer)
    return buffer.getvalue()
