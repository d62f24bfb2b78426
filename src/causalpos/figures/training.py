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
