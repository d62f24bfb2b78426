"""How the trained models' positional pattern grows over training (not in the paper): summary/emergence.parquet."""

from __future__ import annotations

import math
import textwrap

import numpy as np
from matplotlib.figure import Figure

from causalpos.catalogue.models import ordered
from causalpos.figures.style import MODEL_COLOURS, model_label, new_figure, require_table
from causalpos.figures.training import shared_legend

# (metric, stage or None for every stage, panel title, y label); every model is drawn in each panel but the
# per-layer amplitude's, which gets a panel per model (one line per layer would be unreadable twice over)
PANELS = [
    ("concordance", "f", "(f) LN(O): key-order concordance", "concordance, keys ≥ 1"),
    ("concordance", "i", "(i) next layer's scores: key-order concordance", "concordance, keys ≥ 1"),
    ("strength_ratio", "i", "(i): nearer-key advantage / α = 0 simulation's", "ratio (claim 7b)"),
    ("nonrelative_amplitude", "scores", "non-relative amplitude by layer (dashed: α = 0 sim.)", "amplitude, keys ≥ 1"),
    ("heldout_loss", "", "Held-out loss", "nats/token"),
]
PER_MODEL = "nonrelative_amplitude"
COLUMNS = 3
TITLE_CHARS = 36  # characters per line of a panel's title: a panel's axes are some 2.5 inches wide at 10 pt
# The smallest text is "small" (10 pt in the notebook context): 8.2 px where the report shows the 13.2-inch
# figure legibility.REPORT_WIDTH_PX (780 px) wide; "x-small" would be 6.8 px.


def fig_emergence(tables: dict, options) -> Figure:
    """Each metric of the emergence table against tokens seen (symmetric log axis: step 0 is at 0), ± one
    bootstrap SD, in COLUMNS columns so that the figure stays wide (MAX_ASPECT); dashed: the alpha = 0
    simulation's value (grey; per layer in the amplitude panels, in the layer's colour)."""
    frame = require_table(
        tables, "emergence", ("model", "tokens_seen", "layer", "stage", "metric", "value", "uncertainty", "reference")
    )
    models = ordered(frame["model"].unique()) or ["(none)"]
    panels = []  # (panel, the models it draws), in PANELS's order
    for panel in PANELS:
        panels += [(panel, [model]) for model in models] if panel[0] == PER_MODEL else [(panel, models)]
    rows = math.ceil(len(panels) / COLUMNS)
    fig = new_figure(4.4 * COLUMNS, 3.0 * rows + 0.3)
    axes = np.atleast_1d(fig.subplots(rows, COLUMNS, squeeze=False)).ravel()
    first = frame.loc[frame["tokens_seen"] > 0, "tokens_seen"]
    linthresh = float(first.min()) if len(first) else 1.0
    right = float(frame["tokens_seen"].max()) * 1.6 if len(frame) else 10.0
    for ax, ((metric, stage, title, ylabel), drawn_models) in zip(axes, panels):
        rows_of = frame[(frame["metric"] == metric) & (frame["stage"] == stage)]
        for model in drawn_models:
            _draw_model(ax, rows_of[rows_of["model"] == model], model, per_layer=metric == PER_MODEL)
        if metric == "concordance":
            ax.axhline(0.5, ls=":", lw=1, color="gray", label="no order")
        if metric == "strength_ratio" and len(rows_of) and (rows_of["value"] > 0).all():
            ax.set_yscale("log")
        token_axis(ax, linthresh, right)
        prefix = f"{model_label(drawn_models[0], options)}: " if len(drawn_models) == 1 and len(models) > 1 else ""
        # two lines where needed: a title wider than its panel runs into the next one or off the figure
        ax.set_title(textwrap.fill(prefix + title, TITLE_CHARS), fontsize="small")
        ax.set_ylabel(ylabel)
        ax.set_xlabel("Tokens seen")
        if metric == PER_MODEL and ax.get_legend_handles_labels()[0]:  # its layers' shades, beside it
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
        if rows_of.empty:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    for ax in axes[len(panels) :]:
        ax.set_axis_off()
    shared_legend(fig, [ax for ax, (panel, _) in zip(axes, panels) if panel[0] != PER_MODEL])
    return fig


def token_axis(ax, linthresh: float, right: float) -> None:
    """Tokens seen on a symmetric log axis, linear up to the first snapshot: step 0 at the left edge (no empty
    negative decades), ticks at 0 and at the decades past the linear part (a decade inside it would sit
    beside the 0, their labels touching)."""
    ax.set_xscale("symlog", linthresh=linthresh)
    ax.set_xlim(-0.3 * linthresh, right)
    decades = 10.0 ** np.arange(np.ceil(np.log10(linthresh)), np.floor(np.log10(right)) + 1)
    ax.set_xticks([0.0, *decades])


def _draw_model(ax, rows, model: str, per_layer: bool) -> None:
    """One model's line(s) in a panel and its reference (dashed), in the model's colour or a shade per layer."""
    layers = sorted(rows["layer"].dropna().unique()) if per_layer else [None]
    layers = layers or [None]
    colours = dict(zip(layers, _layer_colours(len(layers), MODEL_COLOURS.get(model, "black"))))
    for layer in layers:
        line = (rows if layer is None else rows[rows["layer"] == layer]).sort_values("tokens_seen")
        label = f"layer {int(layer) + 1}" if layer is not None else model_label(model)
        ax.errorbar(
            line["tokens_seen"],
            line["value"],
            yerr=line["uncertainty"].fillna(0.0),
            marker="o",
            markersize=3,
            capsize=2,
            color=colours[layer],
            label=label,
        )
        reference = line["reference"].dropna()
        if not len(reference):
            continue
        if layer is not None:  # the simulation's amplitude of this layer
            ax.axhline(float(reference.iloc[0]), ls="--", lw=1, color=colours[layer])
        elif not any(
            np.isclose(float(reference.iloc[0]), y) for y in _reference_levels(ax)
        ):  # the same for every model
            # the ratio panel's line at 1 is the simulation's strength too: one key entry for both
            ax.axhline(float(reference.iloc[0]), ls="--", lw=1, color="gray", label="α = 0 simulation")


def _reference_levels(ax) -> list[float]:
    return [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]


def _layer_colours(n: int, base: str) -> list:
    """One colour per line: the model's own for one line, else a sequential map from light to dark."""
    if n <= 1:
        return [base]
    from matplotlib import colormaps

    cmap = colormaps["Reds" if base == "tab:red" else "Blues" if base == "tab:blue" else "Greys"]
    return [cmap(0.35 + 0.6 * k / (n - 1)) for k in range(n)]
