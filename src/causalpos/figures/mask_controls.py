"""The pretrained LLMs' pattern under the content controls (results/summary/mask_controls.parquet, issue 43): a
column of panels per model; the non-relative amplitude (8a's metric) and the first keys' emphasis (8d's) at every
layer, a line per condition with its bootstrap band. The documents line is the default run's ledger's 8a and 8d;
claim 12 compares the others with it over layers 2+ (paper)."""

from __future__ import annotations

import pandas as pd
from matplotlib.lines import Line2D

from causalpos.catalogue.models import CONDITIONS
from causalpos.figures.style import layer_axis, model_label, new_figure

PANEL = (4.2, 2.8)  # inches per panel
METRICS = {
    "nonrelative_amplitude": "non-relative amplitude\n(8a, fraction of score RMS)",
    "first_keys_emphasis": "first keys' emphasis\n(8d, keys 1-4, score SDs)",
}
# the documents solid and dark; each control its own colour and dash
STYLES = dict(zip(CONDITIONS, (("black", "-"), ("tab:blue", "--"), ("tab:orange", ":"), ("tab:green", "-."))))


def plot_mask_controls(frame: pd.DataFrame, options: dict | None = None):
    """A matplotlib Figure of the mask_controls table (draw it through figures.style.save_figure)."""
    options = options or {}
    average = frame[(frame["head"] == -1) & (frame["layer"] >= 0) & frame["metric"].isin(list(METRICS))]
    if average.empty:
        raise ValueError("the mask_controls table has no per-layer head-average rows to draw")
    models = sorted(average["model"].unique())
    conditions = [c for c in CONDITIONS if c in set(average["condition"])]
    fig = new_figure(PANEL[0] * max(len(models), 2), PANEL[1] * len(METRICS) + 1.2)
    axes = fig.subplots(len(METRICS), len(models), squeeze=False, sharex="col")
    for column, model in enumerate(models):
        for row, (metric, ylabel) in enumerate(METRICS.items()):
            ax = axes[row, column]
            for condition in conditions:
                rows = average[
                    (average["model"] == model) & (average["condition"] == condition) & (average["metric"] == metric)
                ].sort_values("layer")
                if rows.empty:
                    continue
                layer = rows["layer"].to_numpy(float) + 1  # as the paper numbers them
                value, se = rows["value"].to_numpy(float), rows["uncertainty"].to_numpy(float)
                colour, dash = STYLES[condition]
                ax.plot(layer, value, color=colour, ls=dash, lw=1.3)
                ax.fill_between(layer, value - se, value + se, color=colour, alpha=0.15, lw=0)
            ax.axhline(0.0, color="grey", lw=0.6)
            ax.set_ylabel(ylabel, fontsize="small")
            ax.tick_params(labelsize="small")
            if row == 0:
                size = int(average.loc[average["model"] == model, "seq_len"].max())
                ax.set_title(f"{model_label(model, options)} (S = {size})", fontsize="small", loc="left")
            if row == len(METRICS) - 1:
                layer_axis(ax, "layer (paper)")
                ax.xaxis.label.set_fontsize("small")
    handles = [Line2D([], [], color=STYLES[c][0], ls=STYLES[c][1], label=c) for c in conditions]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=len(handles),
        fontsize="small",
        title="bands: ±1 bootstrap standard error over each condition's groups of sequences",
        title_fontsize="small",
    )
    fig.suptitle("The LLMs' pattern under content controls (claim 12, ours)", fontweight="bold")
    return fig
