"""Plots (matplotlib Figures rendered with Agg, saved as PNG).

from rl.analysis.plots import belief_simplex_figure, save_figure
save_figure(belief_simplex_figure(beliefs, predicted=predicted), "simplex.png")
"""

from rl.analysis.plots.curves import learning_curves_figure, probe_r2_figure
from rl.analysis.plots.save import figure_png, save_figure
from rl.analysis.plots.simplex import belief_simplex_figure, simplex_coordinates

__all__ = [
    "belief_simplex_figure",
    "figure_png",
    "learning_curves_figure",
    "probe_r2_figure",
    "save_figure",
    "simplex_coordinates",
]
