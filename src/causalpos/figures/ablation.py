"""The pattern ablation's figure (issue 27, not in the paper): the loss with the non-relative pattern taken out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from causalpos.catalogue.models import PRETRAINED_KIND, TRAINED_KIND
from causalpos.figures.style import length_axis, model_label, new_figure, require_table
from causalpos.figures.training import shared_legend
from causalpos.models.pattern_ablation import CONDITIONS

CONDITION_LABELS = {
    "none": "none (the model as it is)",
    "pattern": "non-relative pattern removed",
    "shuffled": "control: pattern shuffled within bands",
    "relative": "relative part removed",
    "pattern_sink": "pattern removed, key 0 too",
}
LINEAR_WITHIN = 1e-3  # nats: a panel with larger effects is drawn on a symmetric log scale, linear within this
NEEDS = (
    "model",
    "kind",
    "seed",
    "factor",
    "seq_len",
    "condition",
    "loss",
    "delta",
    "delta_sem",
    "effect",
    "effect_sem",
)


def over_seeds(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per length and condition: the mean of `column` over seeds and its error bar, the SE over seeds (SD /
    sqrt n) with several seeds, else the one seed's SE over sequences (`column`_sem)."""

    def one(group: pd.DataFrame) -> pd.Series:
        n = len(group)
        error = group[column].std(ddof=1) / np.sqrt(n) if n > 1 else group[f"{column}_sem"].iloc[0]
        return pd.Series({"mean": group[column].mean(), "error": error, "n": n})

    return rows.groupby(["seq_len", "condition"], sort=True)[[column, f"{column}_sem"]].apply(one).reset_index()


def pad_limits(ax, low: float, high: float, fraction: float = 0.08) -> None:
    """The y range from low to high and 0, widened by `fraction` of it at each end in the axis' own scale (a
    symmetric log scale's autoscale can leave the outermost marker on the edge)."""
    scale = ax.yaxis.get_transform()
    low, high = scale.transform([min(low, 0.0), max(high, 0.0)])
    margin = fraction * (high - low or 1.0)
    ax.set_ylim(*scale.inverted().transform([low - margin, high + margin]))


def fig_pattern_ablation(tables: dict, options) -> Figure:
    """One panel per trained model: under each condition, the loss gap to the training length (loss at k x it
    minus at 1x) minus the gap under the shuffled control, at each k > 1 (the `effect` column: claim 11's
    statistic for "pattern"; < 0: the condition lets the loss grow less with length than the control), mean
    over training seeds (dots: the seeds; a symmetric log scale, linear within ±0.001, where some exceed
    0.002); a last panel for the pretrained models: each condition's loss minus
    the unmodified model's at their sequence length (±SE over sequences, symmetric log scale)."""
    table = require_table(tables, "pattern_ablation", NEEDS)
    colours = dict(zip(CONDITIONS, sns.color_palette("colorblind", len(CONDITIONS))))
    trained = table[(table["kind"] == TRAINED_KIND) & table["effect"].notna()]
    pretrained = table[table["kind"] == PRETRAINED_KIND]
    models = sorted(trained["model"].unique())
    panels = max(len(models) + (1 if len(pretrained) else 0), 1)
    fig = new_figure(4.2 * panels, 4.2)  # no wider: the report shows it at one width, and its text shrinks with it
    axes = np.atleast_1d(fig.subplots(1, panels))
    offsets = dict(zip(CONDITIONS, np.linspace(0.92, 1.08, len(CONDITIONS))))  # side by side at each length
    for ax, model in zip(axes, models):
        rows = trained[trained["model"] == model]
        n_seeds = rows["seed"].nunique()
        summary = over_seeds(rows, "effect")
        for condition in [c for c in CONDITIONS if c in set(summary["condition"])]:
            line, dots = summary[summary["condition"] == condition], rows[rows["condition"] == condition]
            ax.plot(
                dots["seq_len"] * offsets[condition],
                dots["effect"],
                "o",
                alpha=0.3,
                markersize=3,
                color=colours[condition],
            )
            ax.errorbar(
                line["seq_len"] * offsets[condition],
                line["mean"],
                yerr=line["error"],
                fmt="s",
                capsize=3,
                color=colours[condition],
                label=CONDITION_LABELS[condition],
            )
        ax.axhline(0.0, ls=":", color="gray")
        if (summary["mean"].abs() + summary["error"].fillna(0)).max() > 2 * LINEAR_WITHIN:
            ax.set_yscale("symlog", linthresh=LINEAR_WITHIN)  # the pattern's effects next to the relative part's
        error = summary["error"].fillna(0)
        shown = pd.concat([summary["mean"] - error, summary["mean"] + error, rows["effect"]]).dropna()
        pad_limits(ax, float(shown.min()), float(shown.max()))  # no marker or error bar cut at the edge
        length_axis(ax, rows["seq_len"])
        ax.set_ylabel("Gap - control's gap (nats/token)")
        spread = "SE over seeds" if n_seeds > 1 else "SE over sequences"
        ax.set_title(f"{model_label(model, options)}: {n_seeds} seed{'s' if n_seeds > 1 else ''}\n(±{spread})")
    if len(pretrained):
        ax = axes[len(models)]
        shown = [c for c in CONDITIONS if c != "none" and c in set(pretrained["condition"])]
        names = sorted(pretrained["model"].unique())
        width = 0.8 / max(len(shown), 1)
        for i, condition in enumerate(shown):
            rows = pretrained[pretrained["condition"] == condition].set_index("model").reindex(names)
            ax.bar(
                np.arange(len(names)) + (i - (len(shown) - 1) / 2) * width,
                rows["delta"],
                width,
                yerr=rows["delta_sem"],
                capsize=2,
                color=colours[condition],
                label=CONDITION_LABELS[condition],
            )
        lengths = pretrained.groupby("model")["seq_len"].first()
        ax.set_xticks(range(len(names)), [f"{model_label(m, options)}\n{int(lengths[m])} tokens" for m in names])
        ax.set_yscale("symlog", linthresh=0.01)  # the relative part's removal is 100x the pattern's
        ax.axhline(0.0, ls=":", color="gray")
        ax.set_ylabel("Loss - unmodified (nats/token)")
        ax.set_title("Pretrained LLMs\n(±SE over sequences)")
    shared_legend(fig, axes, columns=2)
    return fig
