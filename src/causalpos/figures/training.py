"""Training figures (not in the paper): loss curves against the unigram entropy, length generalisation."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from causalpos.figures.style import MODEL_COLOURS, MODEL_LABELS, new_figure, require_table


def fig_training_loss(tables: dict, options) -> Figure:
    """Training and held-out loss of the NoPE model and its RoPE twin against tokens seen,
    with the unigram entropy of the training tokens (what a model that ignores context reaches)."""
    metrics = require_table(tables, "metrics", ("model", "tokens_seen", "train_loss", "heldout_loss"))
    blocks = tables.get("blocks")
    fig = new_figure(11, 4)
    axes = fig.subplots(1, 2)
    for ax, column, title in zip(axes, ("train_loss", "heldout_loss"), ("Training loss", "Held-out loss")):
        for model, rows in metrics.groupby("model", sort=True):
            rows = rows.dropna(subset=[column]).sort_values("tokens_seen")
            ax.plot(rows["tokens_seen"], rows[column], marker="o" if column == "heldout_loss" else None,
                    markersize=3, color=MODEL_COLOURS.get(model), label=MODEL_LABELS.get(model, model))
        if blocks is not None and "train_unigram_entropy" in blocks:
            ax.axhline(float(blocks["train_unigram_entropy"].iloc[0]), ls="--", color="gray",
                       label="unigram entropy")
        ax.set_xlabel("Tokens seen")
        ax.set_ylabel("Loss (nats/token)")
        ax.set_title(title)
        ax.legend(fontsize="small")
    return fig


def fig_length_generalization(tables: dict, options) -> Figure:
    """Held-out loss at the training length and at 2x and 4x it, for both models (±SEM)."""
    lengths = require_table(tables, "length_eval", ("model", "factor", "seq_len", "heldout_loss", "heldout_loss_sem"))
    fig = new_figure(6, 4)
    ax = fig.subplots()
    for model, rows in lengths.groupby("model", sort=True):
        rows = rows.sort_values("seq_len")
        ax.errorbar(rows["seq_len"], rows["heldout_loss"], yerr=rows["heldout_loss_sem"], marker="o", capsize=3,
                    color=MODEL_COLOURS.get(model), label=MODEL_LABELS.get(model, model))
    trained = lengths.loc[lengths["factor"] == 1, "seq_len"]
    if not trained.empty:
        ax.axvline(float(trained.iloc[0]), ls=":", color="gray", label="training length")
    ax.set_xscale("log", base=2)
    ticks = sorted(lengths["seq_len"].unique())
    ax.set_xticks(ticks, [str(int(t)) for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("Sequence length (tokens)")
    ax.set_ylabel("Held-out loss (nats/token)")
    ax.set_title("Length generalisation")
    ax.legend(fontsize="small")
    return fig


def fig_length_seeds(tables: dict, options) -> Figure:
    """Left: the gap (loss at k x the training length minus at 1x) of every seed (dots) and its mean ± SD over
    seeds, per model; right: the paired NoPE - RoPE gap difference, mean ± SD and ± SEM (< 0: NoPE loses less)."""
    summary = require_table(tables, "length_seeds", ("model", "factor", "seq_len", "n_seeds", "gap_mean", "gap_sd",
                                                     "gap_sem"))
    per_seed = require_table(tables, "length_eval", ("model", "seed", "factor", "seq_len", "gap"))
    fig = new_figure(11, 4)
    left, right = fig.subplots(1, 2)
    for model, rows in summary[summary["model"].isin(MODEL_COLOURS)].groupby("model", sort=True):
        colour = MODEL_COLOURS[model]
        dots = per_seed[per_seed["model"] == model]
        left.plot(dots["seq_len"], dots["gap"], "o", alpha=0.35, markersize=4, color=colour)
        rows = rows.sort_values("seq_len")
        left.errorbar(rows["seq_len"], rows["gap_mean"], yerr=rows["gap_sd"].fillna(0.0), marker="s", capsize=3,
                      color=colour, label=f"{MODEL_LABELS[model]} (mean ± SD, {int(rows['n_seeds'].max())} seeds)")
    pair = summary[~summary["model"].isin(MODEL_COLOURS)].sort_values("seq_len")
    if len(pair):
        right.errorbar(pair["seq_len"], pair["gap_mean"], yerr=pair["gap_sd"].fillna(0.0), marker="s", capsize=5,
                       color="gray", label="mean ± SD over seeds")
        right.errorbar(pair["seq_len"], pair["gap_mean"], yerr=pair["gap_sem"].fillna(0.0), fmt="none", capsize=3,
                       lw=2.5, color="black", label="± SEM")
    for ax, title in ((left, "Gap to the training length, per seed"), (right, "NoPE gap - RoPE gap (paired by seed)")):
        ax.axhline(0.0, ls=":", color="gray")
        ax.set_xscale("log", base=2)
        ticks = sorted(summary["seq_len"].unique())
        if ticks:
            ax.set_xticks(ticks, [str(int(t)) for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("Sequence length (tokens)")
        ax.set_ylabel("Δ held-out loss (nats/token)")
        ax.set_title(title)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    return fig
