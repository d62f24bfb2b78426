"""The summary as figures (not in the paper): non-relativeness, nearer-key preference, position probe.

Each draws one of rule summary's tables (analysis.summary: per model and layer), as that rule wrote it; the models
in name order, the order of the tables' rows.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from causalpos.catalogue.tables import INCREASING_COLUMNS, NONRELATIVENESS_COLUMNS, PROBE_SUMMARY_COLUMNS
from causalpos.figures.style import build_figure, built, layer_axis, model_colours, model_label, require_table


def _summary_models(frame: pd.DataFrame) -> list[str]:
    """The models of a summary table in name order (rule summary writes them in the order it read them)."""
    return sorted(pd.unique(frame["model"]))


def legend_beside(ax, models, colours, styles: list[tuple[str, str]], options: dict) -> None:
    """The key of a panel (each model's colour by its name, options["model_labels"]; then the line styles),
    right of the axes: lines run across every layer, so no place inside the axes is free of data for every
    model; constrained layout makes room beside it."""
    handles = [Line2D([], [], color=colours[m], lw=2, label=model_label(m, options)) for m in models]
    handles += [Line2D([], [], color="black", ls=ls, label=label) for ls, label in styles]
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))


@built
def fig_nonrelativeness(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Per layer and model: the non-relativeness index, the left-region deficit and the size of the
    pattern against the raw scores (the nonrelativeness table); solid = every key, dashed = without key 0."""
    stats = require_table(tables, "nonrelativeness", NONRELATIVENESS_COLUMNS)
    models = _summary_models(stats)
    colours = model_colours(models)
    # two rows of two (the fourth cell empty): three panels in a row, each with its key beside it, would need
    # a figure too wide for its text (legibility.REPORT_WIDTH_PX: 10 pt is 8.3 px on 13 inches)
    fig = build_figure(13, 8)
    panels = fig.subplot_mosaic([["index", "deficit"], ["scale", "."]])
    ax_index, ax_deficit, ax_scale = panels["index"], panels["deficit"], panels["scale"]
    for model in models:
        rows = stats[stats["model"] == model].sort_values("layer")
        x, c = rows["layer"] + 1, colours[model]
        ax_index.plot(x, rows["index"], "o-", color=c, ms=4)
        ax_index.plot(x, rows["index_no_sink"], "s--", color=c, ms=3)
        ax_index.plot(x, rows["index_noise"], ":", color=c, lw=1)
        ax_deficit.plot(x, rows["deficit"], "o-", color=c, ms=4)
        ax_deficit.plot(x, rows["deficit_no_sink"], "s--", color=c, ms=3)
        ax_scale.plot(x, rows["score_std"], "o-", color=c, ms=4)
        ax_scale.plot(x, rows["pattern_std"], "s--", color=c, ms=3)
    ax_index.axhline(0.0, color="grey", lw=0.8)
    ax_index.set_ylabel("Var(diag.-normalised) / Var(scores)")
    ax_index.set_title("Non-relativeness index (0 = relative)")
    legend_beside(
        ax_index, models, colours, [("-", "all keys"), ("--", "without key 0"), (":", "sampling-noise floor")], options
    )
    ax_deficit.axhline(0.0, color="grey", lw=0.8)
    ax_deficit.set_ylabel("Mean diag.-normalised score, left region")
    ax_deficit.set_title("Left-region deficit (< 0: left darker)")
    legend_beside(ax_deficit, models, colours, [("-", "all keys"), ("--", "without key 0")], options)
    ax_scale.set_ylim(bottom=0)
    ax_scale.set_ylabel("Standard deviation (off-diagonal)")
    ax_scale.set_title("Size: raw scores vs pattern")
    legend_beside(ax_scale, models, colours, [("-", "raw scores"), ("--", "diag.-normalised")], options)
    for ax in (ax_index, ax_deficit, ax_scale):
        layer_axis(ax)
    return fig


@built
def fig_increasing_fraction(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Per layer and model: share of adjacent off-diagonal key steps where the nearer key scores
    higher (the increasing_fraction table), ± SEM; solid = every key, dashed = without key 0."""
    stats = require_table(tables, "increasing_fraction", INCREASING_COLUMNS)
    models = _summary_models(stats)
    colours = model_colours(models)
    fig = build_figure(7.5, 4.6)
    ax = fig.subplots()
    for model in models:
        rows = stats[stats["model"] == model].sort_values("layer")
        x, c = rows["layer"] + 1, colours[model]
        ax.errorbar(x, rows["fraction"], yerr=rows["fraction_sem"], fmt="o-", ms=4, capsize=2, color=c)
        ax.errorbar(
            x + 0.1, rows["fraction_no_sink"], yerr=rows["fraction_no_sink_sem"], fmt="s--", ms=3, capsize=2, color=c
        )
    ax.axhline(0.5, color="grey", lw=0.8)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("Fraction of steps j → j+1 with higher score")
    ax.set_title("Nearer keys score higher (0.5 = no preference)")
    legend_beside(ax, models, colours, [("-", "all keys"), ("--", "without key 0")], options)
    layer_axis(ax)
    return fig


@built
def fig_position_probe(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Per hidden state and model: held-out MAE of the linear position probe and of the mean-position
    baseline (positions), and their ratio (1 = no positional information): the position_probe table."""
    stats = require_table(tables, "position_probe", PROBE_SUMMARY_COLUMNS)
    models = _summary_models(stats)
    colours = model_colours(models)
    fig = build_figure(12, 4.4)
    ax_mae, ax_ratio = fig.subplots(1, 2)
    for model in models:
        rows = stats[stats["model"] == model].sort_values("layer")
        c = colours[model]
        ax_mae.plot(rows["layer"], rows["mae"], "o-", ms=4, color=c)
        ax_mae.plot(rows["layer"], rows["mae_baseline"], ":", color=c)
        ax_ratio.plot(rows["layer"], rows["ratio"], "o-", ms=4, color=c)
    xlabel = "Hidden state\n(0 = embeddings, k = output of Layer k)"  # two lines: one is wider than a panel
    ax_mae.set_ylabel("Held-out mean absolute error (positions)")
    ax_mae.set_title("Linear position probe")
    legend_beside(ax_mae, models, colours, [("-", "probe"), (":", "mean-position baseline")], options)
    ax_ratio.axhline(1.0, color="grey", lw=0.8)
    ax_ratio.set_ylim(bottom=0)
    ax_ratio.set_ylabel("Probe MAE / baseline MAE")
    ax_ratio.set_title("Relative error (1 = no positional information)")
    legend_beside(ax_ratio, models, colours, [], options)
    for ax in (ax_mae, ax_ratio):
        layer_axis(ax, xlabel)
    return fig
