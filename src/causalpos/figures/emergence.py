"""How the trained models' positional pattern grows over training (not in the paper): summary/emergence.parquet."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from causalpos.figures.style import MODEL_COLOURS, model_label, new_figure, require_table

# (metric, stage or None for every stage, row title, y label)
PANELS = [
    ("concordance", "f", "(f) LN(O): key-order concordance", "concordance, keys ≥ 1"),
    ("concordance", "i", "(i) next layer's scores: key-order concordance", "concordance, keys ≥ 1"),
    ("strength_ratio", "i", "(i): nearer-key advantage / α = 0 simulation's", "ratio (claim 7b)"),
    ("nonrelative_amplitude", "scores", "Non-relative amplitude per layer", "amplitude, keys ≥ 1"),
    ("heldout_loss", "", "Held-out loss", "nats/token"),
]


def fig_emergence(tables: dict, options) -> Figure:
    """Each metric of the emergence table against tokens seen (symmetric log axis: step 0 is at 0), one column per
    trained model, ± one bootstrap SD; dashed: the alpha = 0 simulation's value (the same colour per layer)."""
    frame = require_table(tables, "emergence", ("model", "tokens_seen", "layer", "stage", "metric", "value",
                                                 "uncertainty", "reference"))
    models = sorted(frame["model"].unique(), key=lambda m: (m not in MODEL_COLOURS, list(MODEL_COLOURS).index(m)
                                                             if m in MODEL_COLOURS else 0, m)) or ["(none)"]
    fig = new_figure(4.2 * len(models), 2.6 * len(PANELS))
    axes = np.atleast_2d(fig.subplots(len(PANELS), len(models), squeeze=False))
    first = frame.loc[frame["tokens_seen"] > 0, "tokens_seen"]
    linthresh = float(first.min()) if len(first) else 1.0
    for col, model in enumerate(models):
        for row, (metric, stage, title, ylabel) in enumerate(PANELS):
            ax = axes[row, col]
            rows = frame[(frame["model"] == model) & (frame["metric"] == metric) & (frame["stage"] == stage)]
            layers = sorted(rows["layer"].dropna().unique()) or [None]
            colours = dict(zip(layers, _layer_colours(len(layers), MODEL_COLOURS.get(model, "black"))))
            for layer in layers:
                line = rows if layer is None else rows[rows["layer"] == layer]
                line = line.sort_values("tokens_seen")
                label = f"layer {int(layer) + 1}" if metric == "nonrelative_amplitude" and layer is not None else None
                ax.errorbar(line["tokens_seen"], line["value"], yerr=line["uncertainty"].fillna(0.0), marker="o",
                            markersize=3, capsize=2, color=colours[layer], label=label)
                reference = line["reference"].dropna()
                if len(reference):
                    ax.axhline(float(reference.iloc[0]), ls="--", lw=1, color=colours[layer],
                               label="α = 0 simulation" if label is None and metric != "strength_ratio" else None)
            if metric == "concordance":
                ax.axhline(0.5, ls=":", lw=1, color="gray", label="no order")
            if metric == "strength_ratio" and (rows["value"] > 0).all() and len(rows):
                ax.set_yscale("log")
            ax.set_xscale("symlog", linthresh=linthresh)
            ax.set_title(f"{model_label(model)}: {title}", fontsize="small")
            ax.set_ylabel(ylabel)
            if row == len(PANELS) - 1:
                ax.set_xlabel("Tokens seen")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize="x-small")
            if rows.empty:
                ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    return fig


def _layer_colours(n: int, base: str) -> list:
    """One colour per line: the model's own for one line, else a sequential map from light to dark."""
    if n <= 1:
        return [base]
    from matplotlib import colormaps

    cmap = colormaps["Reds" if base == "tab:red" else "Blues" if base == "tab:blue" else "Greys"]
    return [cmap(0.35 + 0.6 * k / (n - 1)) for k in range(n)]
