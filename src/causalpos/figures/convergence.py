"""The LLM claims as N grows (results/summary/convergence.parquet): one row of panels per model, one column
per claim (a wide figure: the report shows it whole).

Claims over the layers (8b, 8c): the value at each number of sequences with ±z standard errors (z =
family.interval_z(alpha), 1.645 at 0.05: one-sided 95% bounds, unadjusted; the verdicts are Holm-adjusted),
coloured by verdict. Claims per layer (8a, 8d): the value at each layer, one line per number of
sequences (lighter: fewer), the verdict's margin as a band; a layer whose verdict changes with N is ringed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.lines import Line2D

from causalpos.analysis.claims.family import interval_z
from causalpos.figures.ledger import VERDICT_STYLE
from causalpos.figures.style import layer_axis, model_label, new_figure

PANEL = (3.3, 2.8)  # inches per panel
# The smallest text: "small" (10 pt in the notebook context) is at least legibility.MIN_TEXT_PX high where the
# report shows the figure legibility.REPORT_WIDTH_PX (780 px) wide, for a figure of up to 13.5 inches (four
# claims: 13.2); "x-small" would not be.
SMALLEST = "small"
OVER_LAYERS = ("8b", "8c")


def plot_convergence(frame: pd.DataFrame, options: dict | None = None):
    """A matplotlib Figure of the convergence table (draw it through figures.style.save_figure)."""
    options = options or {}
    if frame.empty:
        raise ValueError("the convergence table is empty: no pretrained model with a groups table")
    models = sorted(frame["model"].unique())
    claims = sorted(frame["claim_id"].unique())
    # at least two panels wide: the legend and the title need the room with a single claim
    fig = new_figure(PANEL[0] * max(len(claims), 2), PANEL[1] * len(models) + 1.6)
    axes = fig.subplots(len(models), len(claims), squeeze=False)
    sizes = sorted(frame["n_sequences"].unique())
    shade = colormaps[options.get("cmap", "viridis")]
    colour = {n: shade(0.15 + 0.7 * i / max(1, len(sizes) - 1)) for i, n in enumerate(sizes)}
    for row, model in enumerate(models):
        for column, claim_id in enumerate(claims):
            ax = axes[row, column]
            rows = frame[(frame["model"] == model) & (frame["claim_id"] == claim_id)]
            if rows.empty:
                ax.set_axis_off()
                continue
            first = rows.iloc[0]
            z = interval_z(float(first["alpha"]))
            if claim_id in OVER_LAYERS:
                _over_n(ax, rows, z)
            else:
                _per_layer(ax, rows, z, colour)
            ax.axhline(float(first["threshold"]), ls="--", color="black", lw=1)
            ax.set_title(
                f"{claim_id}, {model_label(model, options)} (S = {int(first['seq_len'])})", fontsize="small", loc="left"
            )
            ax.set_ylabel(f"value ({first['direction']} {float(first['threshold']):g})", fontsize=SMALLEST)
            ax.tick_params(labelsize=SMALLEST)
    handles = [
        Line2D([], [], color=c, marker=m, linestyle="none", label=v)
        for v, (c, m) in VERDICT_STYLE.items()
        if v != "by construction"
    ]  # claim 8 is measured
    handles += [Line2D([], [], color=colour[n], label=f"N = {n}") for n in sizes]
    handles.append(Line2D([], [], color="black", ls="--", label="threshold"))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(len(handles), 4),
        fontsize="small",
        title=f"error bars and bands: ±{interval_z(float(frame['alpha'].iloc[0])):.3g} bootstrap standard "
        "errors on the first groups of sequences\n(one-sided bounds, unadjusted; verdicts Holm-adjusted); "
        "ringed: the verdict changes with N",
        title_fontsize="small",
    )
    fig.suptitle("LLM claims as the number of sequences N grows", fontweight="bold")
    return fig


def _over_n(ax, rows: pd.DataFrame, z: float) -> None:
    rows = rows.sort_values("n_sequences")
    ax.plot(rows["n_sequences"], rows["value"], color="tab:gray", lw=1)
    for verdict, (colour, marker) in VERDICT_STYLE.items():
        pick = rows[rows["verdict"] == verdict]
        if len(pick):
            ax.errorbar(
                pick["n_sequences"],
                pick["value"],
                yerr=(z * pick["uncertainty"]).fillna(0.0),
                fmt=marker,
                color=colour,
                ms=5,
                capsize=2,
                lw=1,
            )
    ax.set_xscale("log", base=2)
    ax.set_xticks(rows["n_sequences"], [str(n) for n in rows["n_sequences"]])
    ax.set_xlabel("sequences N", fontsize=SMALLEST)


def _per_layer(ax, rows: pd.DataFrame, z: float, colour: dict) -> None:
    for n, at_n in rows.groupby("n_sequences", sort=True):
        at_n = at_n.sort_values("layer")
        layer = at_n["layer"].to_numpy(float) + 1  # as the paper numbers them
        value, margin = at_n["value"].to_numpy(float), z * at_n["uncertainty"].to_numpy(float)
        ax.plot(layer, value, color=colour[n], lw=1.2)
        ax.fill_between(layer, value - margin, value + margin, color=colour[n], alpha=0.15, lw=0)
    last = rows[rows["n_sequences"] == rows["n_sequences"].max()].set_index("layer")
    changed = [layer for layer, at in rows.groupby("layer") if at["verdict"].nunique() > 1]
    if changed:
        ax.plot(np.asarray(changed, float) + 1, last.loc[changed, "value"], "o", mfc="none", mec="tab:red", ms=8)
    layer_axis(ax, "layer (paper)")  # whole layers: no 2.5, 7.5 between them
    ax.xaxis.label.set_fontsize(SMALLEST)
