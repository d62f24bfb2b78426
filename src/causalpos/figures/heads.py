"""Every attention head of every extracted model (not in the paper): results/summary/heads.parquet as heatmaps.

One panel per model and metric (analysis.heads): the non-relative amplitude (keys >= 1, claim 8a's, per head)
and the emphasis on keys 1-4 (claim 8d's, per head), each a heads x layers grid, layers and heads 1-based as
the figures label layers (the tables' head 0 is head 1 here). A line of panels per metric; models side by side,
wrapped onto further lines where a line would be wider than LINE_WIDTH.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from causalpos.catalogue.models import ordered
from causalpos.catalogue.tables import HEADS_COLUMNS
from causalpos.figures.style import (
    MAX_ASPECT,
    build_figure,
    built,
    difference_cmap,
    model_label,
    require_table,
    score_cmap,
    tick_step,
)

# metric -> (panel title, colour bar label, centred on 0)
METRICS = {
    "nonrelative_amplitude": ("non-relative amplitude", "amplitude, keys ≥ 1", False),
    "first_keys_emphasis": ("emphasis on keys 1-4", "score SDs above their diagonals", True),
}
LINE_WIDTH = 13.0  # inches: 10 pt text stays 8 px or more where the report shows the figure 780 px wide
PANEL_HEIGHT = 2.6  # inches per row of panels (less where the figure would be taller than MAX_ASPECT allows)
TITLE_CHARS = 34


def panel_width(layers: int) -> float:
    """Inches of one model's panel: wider for more layers, within reason (a colour bar beside each)."""
    return float(np.clip(1.6 + 0.09 * layers, 2.7, 4.4))


def model_order(models) -> list:
    """The trained models first (NoPE, RoPE), then the others by name, as the other figures list them."""
    return ordered(models)


def lines_of(models: list, widths: dict) -> list[list]:
    """Models in lines of panels no wider than LINE_WIDTH (at least one per line)."""
    lines, current, used = [], [], 0.0
    for model in models:
        if current and used + widths[model] > LINE_WIDTH:
            lines.append(current)
            current, used = [], 0.0
        current.append(model)
        used += widths[model]
    return lines + [current] if current else lines


def grid(rows: pd.DataFrame) -> np.ndarray:
    """One model's values of one metric as [head, layer] (NaN where no row)."""
    heads, layers = int(rows["head"].max()) + 1, int(rows["layer"].max()) + 1
    matrix = np.full((heads, layers), np.nan)
    matrix[rows["head"].to_numpy(int), rows["layer"].to_numpy(int)] = rows["value"].to_numpy(float)
    return matrix


def one_based_ticks(axis, n: int) -> None:
    """Ticks at cells 1, step, 2 step, ... (1-based labels) of an axis of n cells."""
    step = tick_step(n)
    cells = sorted({0, *range(step - 1, n, step)})
    axis.set_ticks(cells, [str(c + 1) for c in cells])


def draw_panel(ax, matrix: np.ndarray, metric: str, title: str, options: dict) -> None:
    _, bar_label, centred = METRICS[metric]
    finite = matrix[np.isfinite(matrix)]
    if centred:
        half = float(np.abs(finite).max()) if finite.size else 1.0
        limits, cmap = (-(half or 1.0), half or 1.0), difference_cmap(options)
    else:
        top = float(finite.max()) if finite.size else 1.0
        limits, cmap = (0.0, top or 1.0), score_cmap(options)
    image = ax.imshow(
        np.ma.masked_invalid(matrix),
        aspect="auto",
        cmap=cmap,
        vmin=limits[0],
        vmax=limits[1],
        interpolation="nearest",
        origin="upper",
    )
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.08, pad=0.03)
    bar.set_label(bar_label, fontsize="small")
    one_based_ticks(ax.xaxis, matrix.shape[1])
    one_based_ticks(ax.yaxis, matrix.shape[0])
    ax.set_xlabel("Layer")
    ax.set_ylabel("Head")
    ax.set_title(textwrap.fill(title, TITLE_CHARS), fontsize="small")


@built
def fig_heads(tables: dict, options: dict) -> Figure:
    """Per model, a heads x layers heatmap of each metric of heads.parquet; a figure that says so where the
    table has no rows (every extraction ran with extraction.per_head: false)."""
    frame = require_table(tables, "heads", HEADS_COLUMNS)
    models = model_order(frame["model"].unique())
    if not models:
        fig = build_figure(6.0, 2.0)
        ax = fig.subplots()
        ax.set_axis_off()
        ax.text(
            0.5,
            0.5,
            "No per-head maps:\nthe extractions ran with extraction.per_head: false",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        return fig
    widths = {m: panel_width(int(frame.loc[frame["model"] == m, "layer"].max()) + 1) for m in models}
    lines = lines_of(models, widths)
    width = max(sum(widths[m] for m in line) for line in lines)
    rows = len(METRICS) * len(lines)
    fig = build_figure(width, min(PANEL_HEIGHT, (MAX_ASPECT * width - 0.3) / rows) * rows + 0.2, w_pad=0.1)
    blocks = np.atleast_1d(fig.subfigures(len(lines), 1, squeeze=False)).ravel()
    for block, line in zip(blocks, lines):
        ratios = [widths[m] for m in line]
        spare = width - sum(ratios)  # a shorter line keeps the panels' widths: an empty column at its end
        axes = block.subplots(
            len(METRICS),
            len(line) + (spare > 0.1),
            squeeze=False,
            width_ratios=ratios + ([spare] if spare > 0.1 else []),
        )
        for ax in axes[:, len(line) :].ravel():
            ax.set_axis_off()
        for row, metric in enumerate(METRICS):
            for column, model in enumerate(line):
                rows = frame[(frame["model"] == model) & (frame["metric"] == metric)]
                draw_panel(
                    axes[row, column],
                    grid(rows),
                    metric,
                    f"{model_label(model, options)}: {METRICS[metric][0]}",
                    options,
                )
    return fig
