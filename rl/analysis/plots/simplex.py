"""Beliefs over three states as points in the 2-simplex, true beside predicted.

    from rl.analysis.plots import belief_simplex_figure, save_figure

    figure = belief_simplex_figure(true_beliefs)                              # one panel
    figure = belief_simplex_figure(true_beliefs, predicted=probe.predict(x))  # true | predicted
    save_figure(figure, "results/<run-id>/belief_simplex.png")

Each point is drawn at x = p1 + p2 / 2, y = (sqrt(3) / 2) p2 and coloured by its *true* belief read
as RGB (p0, p1, p2), so in the predicted panel a colour shows where a true belief was mapped.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

_CORNERS = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])


def simplex_coordinates(beliefs: np.ndarray) -> np.ndarray:
    """(n, 3) beliefs -> (n, 2) points of the equilateral triangle with corners state 0, 1, 2."""
    beliefs = _three_state(beliefs, "beliefs")
    return beliefs @ _CORNERS


def belief_simplex_figure(beliefs: np.ndarray, *, predicted: np.ndarray | None = None, title: str = "") -> Figure:
    """A Figure with the true beliefs and, if given, the predictions beside them (same colours)."""
    beliefs = _three_state(beliefs, "beliefs")
    panels = [("true belief", beliefs)]
    if predicted is not None:
        predicted = _three_state(predicted, "predicted")
        if predicted.shape != beliefs.shape:
            raise ValueError(f"predicted {predicted.shape} must match beliefs {beliefs.shape} row for row")
        panels.append(("probe prediction", predicted))
    figure = Figure(figsize=(5 * len(panels), 4.6), dpi=150)
    colours = np.clip(beliefs, 0.0, 1.0)
    # Small points for dense clouds (88572 Mess3 contexts show the fractal), larger for a few hundred.
    point_size = float(np.clip(20000 / len(beliefs), 0.3, 6.0))
    for index, (name, points) in enumerate(panels):
        axes = figure.add_subplot(1, len(panels), index + 1)
        xy = simplex_coordinates(points)
        axes.plot(*np.vstack([_CORNERS, _CORNERS[:1]]).T, color="0.6", linewidth=0.8)
        axes.scatter(xy[:, 0], xy[:, 1], c=colours, s=point_size, linewidths=0, rasterized=True)
        for corner, label in zip(_CORNERS, ("state 0", "state 1", "state 2")):
            axes.annotate(
                label,
                corner,
                textcoords="offset points",
                xytext=(0, -10 if corner[1] == 0 else 4),
                ha="center",
                fontsize=8,
            )
        axes.set_title(name, fontsize=10)
        axes.set_aspect("equal")
        axes.set_axis_off()
    if title:
        figure.suptitle(title, fontsize=11)
    return figure


def _three_state(beliefs: np.ndarray, name: str) -> np.ndarray:
    beliefs = np.asarray(beliefs, dtype=np.float64)
    if beliefs.ndim != 2 or beliefs.shape[1] != 3:
        raise ValueError(f"{name} must be (n, 3) distributions over three states, got shape {beliefs.shape}")
    return beliefs
