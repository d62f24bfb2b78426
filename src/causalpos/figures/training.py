"""Training figures (not in the paper): loss curves against the unigram entropy, length generalisation."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from causalpos.catalogue.models import TRAINED
from causalpos.figures.style import MODEL_COLOURS, MODEL_LABELS, length_axis, new_figure, require_table


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
            ax.plot(
                rows["tokens_seen"],
                rows[column],
                marker="o" if column == "heldout_loss" else None,
                markersize=3,
                color=MODEL_COLOURS.get(model),
                label=MODEL_LABELS.get(model, model),
            )
        if blocks is not None and "train_unigram_entropy" in blocks:
            ax.axhline(float(blocks["train_unigram_entropy"].iloc[0]), ls="--", color="gray", label="unigram entropy")
        ax.set_xlabel("Tokens seen")
        ax.set_ylabel("Loss (nats/token)")
        ax.set_title(title)
    shared_legend(fig, axes)
    return fig


def shared_legend(fig, axes, columns: int | None = None) -> None:
    """One key for the lines of all `axes` (each label once), below them: inside a panel, a key can cover
    curves that span the whole axis. `columns`: at most that many entries a row (default: all in one)."""
    entries = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if entries:
        fig.legend(
            entries.values(),
            entries.keys(),
            loc="outside lower center",
            ncols=min(len(entries), columns or len(entries)),
            fontsize="small",
        )


def fig_length_generalization(tables: dict, options) -> Figure:
    """Held-out loss at the training length and at 2x and 4x it, for both models (±SEM)."""
    lengths = require_table(tables, "length_eval", ("model", "factor", "seq_len", "heldout_loss", "heldout_loss_sem"))
    fig = new_figure(6, 4)
    ax = fig.subplots()
    for model, rows in lengths.groupby("model", sort=True):
        rows = rows.sort_values("seq_len")
        ax.errorbar(
            rows["seq_len"],
            rows["heldout_loss"],
            yerr=rows["heldout_loss_sem"],
            marker="o",
            capsize=3,
            color=MODEL_COLOURS.get(model),
            label=MODEL_LABELS.get(model, model),
        )
    trained = lengths.loc[lengths["factor"] == 1, "seq_len"]
    if not trained.empty:
        ax.axvline(float(trained.iloc[0]), ls=":", color="gray", label="training length")
    length_axis(ax, lengths["seq_len"])
    ax.set_ylabel("Held-out loss (nats/token)")
    ax.set_title("Length generalisation")
    # beside the axes: the curves and their error bars fill the middle of the panel
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


def fig_length_seeds(tables: dict, options) -> Figure:
    """Left: the gap (loss at k x the training length minus at 1x) of every seed (dots) and its mean ± SD over
    seeds, per model; right: the paired NoPE - RoPE gap difference of every seed (dots; < 0: NoPE loses less)
    with its mean and 95% confidence interval (Student t) per length, annotated with the one-sided exact
    sign-flip p and how many seeds have NoPE losing less (causalpos.analysis.lengths)."""
    summary = require_table(
        tables,
        "length_seeds",
        (
            "model",
            "factor",
            "seq_len",
            "n_seeds",
            "gap_mean",
            "gap_sd",
            "diff_ci_low",
            "diff_ci_high",
            "exact_p_one_sided",
            "n_negative",
            "n_ties",
        ),
    )
    per_seed = require_table(tables, "length_eval", ("model", "seed", "factor", "seq_len", "gap"))
    pairs = require_table(tables, "length_pairs", ("seed", "factor", "seq_len", "diff"))
    fig = new_figure(11, 4)
    left, right = fig.subplots(1, 2)
    for model, rows in summary[summary["model"].isin(TRAINED)].groupby("model", sort=True):
        colour = MODEL_COLOURS[model]
        dots = per_seed[per_seed["model"] == model]
        left.plot(dots["seq_len"], dots["gap"], "o", alpha=0.35, markersize=4, color=colour)
        rows = rows.sort_values("seq_len")
        left.errorbar(
            rows["seq_len"],
            rows["gap_mean"],
            yerr=rows["gap_sd"].fillna(0.0),
            marker="s",
            capsize=3,
            color=colour,
            label=f"{MODEL_LABELS[model]} (mean ± SD, {int(rows['n_seeds'].max())} seeds)",
        )
    pair = summary[~summary["model"].isin(TRAINED)].sort_values("seq_len")
    differences = pairs[pairs["factor"] != 1]  # each seed's d (analysis.lengths); at 1x every gap is 0
    n_pairs = int(pair["n_seeds"].max()) if len(pair) else 0
    if len(pair):
        right.plot(
            differences["seq_len"] * 0.94,
            differences["diff"],
            "o",
            alpha=0.5,
            markersize=4,
            color="gray",
            label="one seed",
        )  # beside the mean, not under it
        tested = pair.dropna(subset=["diff_ci_low", "diff_ci_high"])
        right.errorbar(
            tested["seq_len"],
            tested["gap_mean"],
            yerr=[tested["gap_mean"] - tested["diff_ci_low"], tested["diff_ci_high"] - tested["gap_mean"]],
            fmt="s",
            capsize=4,
            color="black",
            label="mean, 95% CI (t)",
        )
    shown = differences["seq_len"] if len(differences) else summary["seq_len"]  # never an empty log axis
    right.set_xlim(shown.min() / 1.6, shown.max() * 1.6)  # room for the tests under the outer ticks
    # the tests go under each length's tick, where no data point can hide them
    tick_labels = {
        int(row.seq_len): f"{int(row.seq_len)}\np = {row.exact_p_one_sided:.3g}\n"
        f"{int(row.n_negative)}/{int(row.n_seeds - row.n_ties)} < 0"
        for row in pair.dropna(subset=["exact_p_one_sided"]).itertuples()
    }
    titles = (
        (left, "Gap to the training length, per seed"),
        (right, f"NoPE gap - RoPE gap, paired by seed ({n_pairs} seeds)"),
    )
    for ax, title in titles:
        ax.axhline(0.0, ls=":", color="gray")
        ax.set_xscale("log", base=2)
        ticks = sorted(tick_labels) if ax is right and tick_labels else sorted(summary["seq_len"].unique())
        if ticks:
            ax.set_xticks(ticks, [tick_labels.get(int(t), str(int(t))) if ax is right else str(int(t)) for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(
            "Sequence length (tokens)"
            if ax is left or not tick_labels
            else "Sequence length (tokens)\np: one-sided exact sign-flip test; k/n: seeds below 0"
        )
        ax.set_ylabel("Δ held-out loss (nats/token)")
        ax.set_title(title)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    return fig
