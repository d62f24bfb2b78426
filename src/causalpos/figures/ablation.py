"""The pattern ablation's figure (issue 27, not in the paper): the loss with the non-relative pattern taken out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from causalpos.figures.style import MODEL_LABELS, new_figure, require_table
from causalpos.pattern_ablation import CONDITIONS

CONDITION_LABELS = {"none": "none (the model as it is)", "pattern": "non-relative pattern removed",
                    "shuffled": "control: pattern shuffled within bands", "relative": "relative part removed",
                    "pattern_sink": "pattern removed, key 0 too"}
NEEDS = ("model", "kind", "seed", "factor", "seq_len", "condition", "loss", "delta", "delta_sem", "gap", "gap_sem")


def over_seeds(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per length and condition: the mean of `column` over seeds and its error bar, the SE over seeds (SD /
    sqrt n) with several seeds, else the one seed's SE over sequences (`column`_sem)."""
    def one(group: pd.DataFrame) -> pd.Series:
        n = len(group)
        error = group[column].std(ddof=1) / np.sqrt(n) if n > 1 else group[f"{column}_sem"].iloc[0]
        return pd.Series({"mean": group[column].mean(), "error": error, "n": n})
    return rows.groupby(["seq_len", "condition"], sort=True)[[column, f"{column}_sem"]].apply(one).reset_index()


def fig_pattern_ablation(tables: dict, options) -> Figure:
    """One panel per trained model: the gap (loss at k x the training length minus at 1x, under the same
    condition) of every condition, mean over training seeds (dots: the seeds); a last panel for the pretrained
    models: each condition's loss minus the unmodified model's at their sequence length (±SE over sequences)."""
    table = require_table(tables, "pattern_ablation", NEEDS)
    colours = dict(zip(CONDITIONS, sns.color_palette("colorblind", len(CONDITIONS))))
    trained = table[table["kind"] == "trained"]
    pretrained = table[table["kind"] == "pretrained"]
    models = sorted(trained["model"].unique())
    panels = len(models) + (1 if len(pretrained) else 0)
    fig = new_figure(5.5 * max(panels, 1), 4.2)
    axes = np.atleast_1d(fig.subplots(1, max(panels, 1)))
    for ax, model in zip(axes, models):
        rows = trained[trained["model"] == model]
        n_seeds = rows["seed"].nunique()
        summary = over_seeds(rows, "gap")
        offsets = dict(zip(CONDITIONS, np.linspace(0.93, 1.07, len(CONDITIONS))))  # side by side at each length
        for condition in [c for c in CONDITIONS if c in set(summary["condition"])]:
            line = summary[summary["condition"] == condition]
            dots = rows[rows["condition"] == condition]
            ax.plot(dots["seq_len"] * offsets[condition], dots["gap"], "o", alpha=0.3, markersize=3,
                    color=colours[condition])
            ax.errorbar(line["seq_len"] * offsets[condition], line["mean"], yerr=line["error"], marker="s",
                        capsize=3, color=colours[condition], label=CONDITION_LABELS[condition])
        ax.axhline(0.0, ls=":", color="gray")
        ax.set_xscale("log", base=2)
        ticks = sorted(rows["seq_len"].unique())
        ax.set_xticks(ticks, [str(int(t)) for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("Sequence length (tokens)")
        ax.set_ylabel("Loss gap to the training length (nats/token)")
        spread = "SE over seeds" if n_seeds > 1 else "SE over sequences"
        ax.set_title(f"{MODEL_LABELS.get(model, model)}: {n_seeds} seed{'s' if n_seeds > 1 else ''} (±{spread})")
    if len(pretrained):
        ax = axes[len(models)]
        shown = [c for c in CONDITIONS if c != "none" and c in set(pretrained["condition"])]
        names = sorted(pretrained["model"].unique())
        width = 0.8 / max(len(shown), 1)
        for i, condition in enumerate(shown):
            rows = pretrained[pretrained["condition"] == condition].set_index("model").reindex(names)
            ax.bar(np.arange(len(names)) + (i - (len(shown) - 1) / 2) * width, rows["delta"], width,
                   yerr=rows["delta_sem"], capsize=2, color=colours[condition], label=CONDITION_LABELS[condition])
        labels = (options or {}).get("model_labels") or {}
        lengths = pretrained.groupby("model")["seq_len"].first()
        ax.set_xticks(range(len(names)), [f"{labels.get(m, m)}\n{int(lengths[m])} tokens" for m in names])
        ax.axhline(0.0, ls=":", color="gray")
        ax.set_ylabel("Loss minus the unmodified model's (nats/token)")
        ax.set_title("Pretrained LLMs (±SE over sequences)")
    entries = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if entries:
        fig.legend(entries.values(), entries.keys(), loc="outside lower center", ncols=min(len(entries), 3),
                   fontsize="small")
    return fig
