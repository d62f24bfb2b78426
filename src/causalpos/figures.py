"""Figures of the paper (1, 2, 4, 6, 7, 9, 10) and figure S1, from the two tables.

`render_figure(figure_id, tables, options, outputs)` is the one entry point;
`tables` maps a table name ("simulation", "theory", ...) to a DataFrame.
`FIGURES` maps each figure id to a function (tables, options) -> matplotlib Figure.

Heatmaps follow the paper: rows of the matrix are queries (top = position 0),
columns are keys, cells a query cannot see are left blank, and every panel has
its own colour bar. Figures are built without pyplot and saved through
matplotlib's Agg (PNG) and PDF backends, so no global backend or figure
registry is touched.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from causalpos import theory as closed_form

PANEL_SIZE = (3.2, 2.8)  # inches per heatmap panel, colour bar included
PARAMS = ("norm", "scale", "alpha", "pe", "rope_theta", "mask", "residual", "seq_len")
GRID_COLUMNS = ("variant", "layer", "query_pos", "key_pos", "score_mean") + PARAMS


# ---------------------------------------------------------------- helpers


def square_matrix(rows: pd.DataFrame, value: str, label: str = "one panel") -> np.ndarray:
    """Long rows (query_pos, key_pos, value, seq_len) as an n x n array [query_pos, key_pos]; NaN where no row."""
    sizes = rows["seq_len"].unique()
    if len(sizes) != 1:
        raise ValueError(f"{label} has several seq_len values: {sorted(sizes)}")
    n = int(sizes[0])
    matrix = np.full((n, n), np.nan)
    matrix[rows["query_pos"].to_numpy(int), rows["key_pos"].to_numpy(int)] = rows[value].to_numpy(float)
    return matrix


def layer_matrix(table: pd.DataFrame, variant: str, layer: int, value: str = "score_mean") -> np.ndarray:
    """One layer of one variant as an n x n array [query_pos, key_pos]; NaN where no row (invisible)."""
    rows = table[(table["variant"] == variant) & (table["layer"] == layer)]
    if rows.empty:
        raise ValueError(f"no rows for variant {variant!r}, layer {layer}")
    return square_matrix(rows, value, f"variant {variant!r}")


def _tick_step(n: int) -> int:
    return next((s for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500) if n / s <= 6), max(1, n // 5))


def draw_heatmap(ax, matrix: np.ndarray, cmap: str, title: str | None = None, center: float | None = None,
                 annot: bool = False, one_based: bool = False) -> None:
    """Seaborn heatmap of a [query, key] matrix with NaN cells blank and its own colour bar."""
    n = matrix.shape[1]
    kwargs = {}
    if center is not None:  # diverging: symmetric limits around the centre
        finite = matrix[np.isfinite(matrix)]
        lim = float(np.abs(finite - center).max()) if finite.size else 1.0
        lim = lim or 1.0
        kwargs = dict(vmin=center - lim, vmax=center + lim)  # seaborn's own `center` warns on new matplotlib
    if annot:
        kwargs.update(annot=True, fmt=".3f", annot_kws={"fontsize": "small"})
    else:
        kwargs.update(rasterized=True)  # keeps the PDF small: one image per panel
    labels = np.arange(1, n + 1) if one_based else _tick_step(n)
    sns.heatmap(matrix, ax=ax, mask=~np.isfinite(matrix), cmap=cmap, square=True, cbar=True,
                xticklabels=labels, yticklabels=labels, **kwargs)
    colorbar = ax.collections[0].colorbar
    # matplotlib rasterises colour bars of 50+ colours, and in a PDF each rasterised artist costs a
    # raster of the whole figure: gigabytes for a 60-panel figure. Its 256 colours stay vector.
    colorbar.n_rasterize = np.iinfo(np.int32).max
    colorbar.update_normal(ax.collections[0])
    ax.set_xlabel("Key position")
    ax.set_ylabel("Query position")
    ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)


def variant_label(params) -> str:
    """Row label from a variant's parameters, e.g. 'LayerNorm, √d scaling, α = 0'."""
    parts = []
    if params["norm"] == "layernorm":
        parts.append("LayerNorm")
    if params["scale"] != "none":
        parts.append({"sqrt_d": "√d scaling", "d": "d scaling"}[params["scale"]])
    if params["pe"] == "rope":
        theta = float(params["rope_theta"])
        parts.append("RoPE" if theta == 10000.0 else f"RoPE (θ = {theta:g})")
    if params["mask"] == "none":
        parts.append("no causal mask")
    if not bool(params["residual"]):
        parts.append("no residual")
    parts.append(f"α = {float(params['alpha']):g}")
    return ", ".join(parts)


def _new_figure(width: float, height: float) -> Figure:
    # A bare Figure keeps matplotlib's no-op base canvas until savefig picks Agg (png) or the
    # PDF backend: seaborn's heatmap forces a full redraw of the figure after every panel, which
    # is free on the base canvas but quadratic in the number of panels on a real one.
    return Figure(figsize=(width, height), layout="constrained")


def _select(simulation: pd.DataFrame | None, options: dict, columns) -> tuple[pd.DataFrame, list[str]]:
    """The rows of the variants named in options['variants'], after checking columns and names."""
    if simulation is None:
        raise ValueError("this figure needs the simulation table, got None")
    missing = [c for c in columns if c not in simulation.columns]
    if missing:
        raise ValueError(f"simulation table lacks column(s) {missing}")
    names = list(options.get("variants") or [])
    if not names:
        raise ValueError("options['variants'] must name at least one variant")
    present = set(simulation["variant"].unique())
    absent = [v for v in names if v not in present]
    if absent:
        raise ValueError(f"variant(s) {absent} missing from the simulation table (it has {sorted(present)})")
    return simulation[simulation["variant"].isin(names)], names


def _params(table: pd.DataFrame, variant: str) -> pd.Series:
    return table.loc[table["variant"] == variant].iloc[0]


def _n_layers(table: pd.DataFrame, variant: str) -> int:
    return int(table.loc[table["variant"] == variant, "layer"].max()) + 1


def _layer_grid(rows: list[tuple[str, list[np.ndarray], str, float | None]]) -> Figure:
    """One row of heatmaps per (label, matrices by layer, cmap, centre); columns are layers."""
    ncols = max(len(mats) for _, mats, _, _ in rows)
    fig = _new_figure(PANEL_SIZE[0] * ncols, (PANEL_SIZE[1] + 0.3) * len(rows))
    subfigs = np.atleast_1d(fig.subfigures(len(rows), 1)).ravel()
    for sub, (label, mats, cmap, center) in zip(subfigs, rows):
        sub.suptitle(label, fontweight="bold")
        axes = np.atleast_1d(sub.subplots(1, ncols)).ravel()
        for layer, ax in enumerate(axes):
            if layer < len(mats):
                draw_heatmap(ax, mats[layer], cmap, f"Layer {layer + 1}", center=center)
            else:
                ax.set_axis_off()
    return fig


# ---------------------------------------------------------------- figures


def fig_mechanism(tables: dict, options) -> Figure:
    """Figure 1: the 3 x 3 mechanism from layer-1 scores to layer-2 scores, values annotated."""
    theory = tables.get("theory")
    alpha = float(options.get("alpha", 0.0))
    n = 3
    i = np.arange(1, n + 1)
    below = np.tril(np.ones((n, n), dtype=bool), k=-1)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)

    scores1 = np.where(below, alpha, 1.0)
    attention1 = closed_form.layer1_attention(n, alpha)
    gram1 = np.where(below, closed_form.g(i, alpha)[:, None], np.diag(closed_form.h(i, alpha) ** 2))
    scores2 = closed_form.layer2_scores(n, alpha)
    if theory is not None:  # use the table's top-left corner: g and h do not depend on seq_len
        corner = theory[np.isclose(theory["alpha"], alpha) & theory["residual"].astype(bool)
                        & (theory["query_pos"] < n) & (theory["key_pos"] <= theory["query_pos"])]
        if len(corner) == n * (n + 1) // 2:
            scores2[corner["query_pos"].to_numpy(int), corner["key_pos"].to_numpy(int)] = corner["score"]
    panels = [
        (scores1, "(a) Layer-1 scores"),
        (attention1, "(b) Layer-1 attention"),
        (gram1, "(c) Gram of $x^{(1)}$: $h(i)^2$, $g(i)$"),
        (scores2, "(d) Layer-2 scores $g(i)/(h(i)h(j))$"),
    ]
    fig = _new_figure(3.6 * 4, PANEL_SIZE[1] + 0.4)
    fig.suptitle(f"How the causal mask creates positional information, α = {alpha:g} (positions 1-based)",
                 fontweight="bold")
    for ax, (matrix, title) in zip(fig.subplots(1, 4), panels):
        matrix = np.where(upper, np.nan, matrix)
        draw_heatmap(ax, matrix, options.get("cmap", "viridis"), title, annot=True, one_based=True)
    return fig


def fig_layer_grid(tables: dict, options) -> Figure:
    """Figures 2, 6, 7: rows are variants, columns are layers, raw mean scores."""
    table, names = _select(tables.get("simulation"), options, GRID_COLUMNS)
    cmap = options.get("cmap", "viridis")
    rows = []
    for name in names:
        mats = [layer_matrix(table, name, layer) for layer in range(_n_layers(table, name))]
        rows.append((variant_label(_params(table, name)), mats, cmap, None))
    return _layer_grid(rows)


def fig_rope(tables: dict, options) -> Figure:
    """Figures 4, 9, 10: per variant, raw scores then diagonal-normalised scores, columns are layers."""
    table, names = _select(tables.get("simulation"), options, GRID_COLUMNS + ("score_diagnorm",))
    rows = []
    for name in names:
        label = variant_label(_params(table, name))
        layers = range(_n_layers(table, name))
        rows.append((f"{label}: scores", [layer_matrix(table, name, k) for k in layers],
                     options.get("cmap", "viridis"), None))
        rows.append((f"{label}: scores minus their diagonal's mean",
                     [layer_matrix(table, name, k, "score_diagnorm") for k in layers],
                     options.get("diverging_cmap", "coolwarm"), 0.0))
    return _layer_grid(rows)


def fig_mc_vs_closed_form(tables: dict, options) -> Figure:
    """Figure S1: layer-2 Monte Carlo scores against Eq. 4 as the hidden size d grows."""
    theory = tables.get("theory")
    table, names = _select(tables.get("simulation"), options, GRID_COLUMNS + ("score_sem", "d", "n_layers"))
    if theory is None:
        raise ValueError("this figure needs the theory table, got None")
    params = table.drop_duplicates("variant").set_index("variant").loc[names]
    wrong = params[(params["norm"] != "l2") | (params["scale"] != "none") | (params["pe"] != "none")
                   | (params["mask"] != "causal") | (params["n_layers"] < 2)].index.tolist()
    if wrong:
        raise ValueError(f"variant(s) {wrong} are not l2/no scaling/no PE/causal with >= 2 layers: "
                         "the closed form does not apply")
    for key in ("alpha", "residual", "seq_len"):
        if params[key].nunique() != 1:
            raise ValueError(f"the variants must share {key}, got {params[key].to_dict()}")
    alpha, residual = float(params["alpha"].iloc[0]), bool(params["residual"].iloc[0])
    n = int(params["seq_len"].iloc[0])

    cf = theory[np.isclose(theory["alpha"], alpha) & (theory["residual"].astype(bool) == residual)]
    cf = cf[cf["key_pos"] < cf["query_pos"]].drop_duplicates(["query_pos", "key_pos"])
    cf = cf.set_index(["query_pos", "key_pos"])["score"]  # g, h do not depend on seq_len: any table will do
    mc = table[(table["layer"] == 1) & (table["key_pos"] < table["query_pos"])]
    mc = mc.join(cf.rename("closed_form"), on=["query_pos", "key_pos"])
    if mc["closed_form"].isna().any():
        raise ValueError(f"theory table has no closed form for alpha = {alpha:g}, residual = {residual} "
                         f"at every pair of seq_len {n}")
    mc = mc.assign(error=(mc["score_mean"] - mc["closed_form"]).abs())

    fig = _new_figure(11.0, 4.2)
    left, right = fig.subplots(1, 2)
    order = params.sort_values("d").index.tolist()
    colours = sns.color_palette("viridis", len(order))
    last = mc[mc["query_pos"] == n - 1]
    for k, (name, colour) in enumerate(zip(order, colours)):
        rows = last[last["variant"] == name].sort_values("key_pos")
        shift = 0.5 * (k - (len(order) - 1) / 2) / len(order)  # small offset so error bars do not overlap
        left.errorbar(rows["key_pos"] + shift, rows["score_mean"], yerr=rows["score_sem"], fmt="o", ms=3,
                      capsize=2, lw=1, color=colour, label=f"d = {params.loc[name, 'd']}")
    line = last.drop_duplicates("key_pos").sort_values("key_pos")
    left.plot(line["key_pos"], line["closed_form"], color="black", lw=1.5, label="closed form (Eq. 4)")
    left.set_xlabel("Key position")
    left.set_ylabel("Layer-2 score")
    left.set_title(f"Query position {n - 1}, off-diagonal keys (α = {alpha:g})")
    left.legend(fontsize="small")

    summary = mc.groupby("variant").agg(max_error=("error", "max"), sem=("score_sem", "median"))
    summary = summary.join(params["d"]).sort_values("d")
    right.loglog(summary["d"], summary["max_error"], "o-", color="C3", label="max |Monte Carlo − closed form|")
    right.loglog(summary["d"], summary["sem"], "s--", color="grey", label="median SEM")
    ref = summary["max_error"].iloc[0] * summary["d"].iloc[0] / summary["d"]
    right.loglog(summary["d"], ref, ":", color="black", label="∝ 1/d")
    right.set_xticks(summary["d"], [str(d) for d in summary["d"]])
    right.xaxis.set_minor_formatter(NullFormatter())
    right.set_xlabel("Hidden size d")
    right.set_ylabel("Layer-2 score difference")
    right.set_title(f"All visible off-diagonal pairs (n = {n})")
    right.legend(fontsize="small")
    return fig


MODEL_COLOURS = {"nope": "tab:red", "rope": "tab:blue"}
MODEL_LABELS = {"nope": "NoPE", "rope": "RoPE"}


def _require(tables: dict, name: str, columns) -> pd.DataFrame:
    table = tables.get(name)
    if table is None:
        raise ValueError(f"this figure needs the {name} table, got None")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{name} table lacks column(s) {missing}")
    return table


def fig_training_loss(tables: dict, options) -> Figure:
    """Training and held-out loss of the NoPE model and its RoPE twin against tokens seen,
    with the unigram entropy of the training tokens (what a model that ignores context reaches)."""
    metrics = _require(tables, "metrics", ("model", "tokens_seen", "train_loss", "heldout_loss"))
    blocks = tables.get("blocks")
    fig = _new_figure(11, 4)
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
    lengths = _require(tables, "length_eval", ("model", "factor", "seq_len", "heldout_loss", "heldout_loss_sem"))
    fig = _new_figure(6, 4)
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


FIGURES = {
    "fig01_mechanism": fig_mechanism,
    "fig02_l2norm": fig_layer_grid,
    "fig04_rope": fig_rope,
    "fig06_alpha": fig_layer_grid,
    "fig07_layernorm": fig_layer_grid,
    "fig09_rope_alpha": fig_rope,
    "fig10_rope_nomask": fig_rope,
    "figS1_mc_vs_closed_form": fig_mc_vs_closed_form,
    "figT1_training_loss": fig_training_loss,
    "figT2_length_generalization": fig_length_generalization,
}


# ---------------------------------------------------------------- entry point


def render_figure(figure_id: str, tables: dict[str, pd.DataFrame], options: dict, outputs) -> None:
    """Draw FIGURES[figure_id] and write it to every path in outputs (format from the suffix)."""
    from causalpos.activation_figures import ACTIVATION_FIGURES  # it builds on this module's helpers

    figures = {**FIGURES, **ACTIVATION_FIGURES}
    if figure_id not in figures:
        raise ValueError(f"unknown figure {figure_id!r}; known: {sorted(figures)}")
    save_figure(lambda: figures[figure_id](tables, options), options, outputs, figure_id)


def save_figure(draw, options: dict, outputs, label: str = "figure") -> None:
    """Call draw() -> Figure in the plot style of `options` and write it to every path in outputs.

    Each file is written under a temporary name in its folder and renamed only
    after all of them were written, so no half-written figure looks complete.
    """
    outputs = [Path(p) for p in outputs]
    if not outputs:
        raise ValueError(f"{label}: no output paths given")
    supported = FigureCanvasBase.get_supported_filetypes()
    bad = [str(p) for p in outputs if p.suffix.lstrip(".").lower() not in supported]
    if bad:
        raise ValueError(f"{label}: unsupported figure format in {bad}; supported: {sorted(supported)}")

    font_scale = float(options.get("font_scale", 1.0))
    with sns.plotting_context("notebook", font_scale=font_scale), sns.axes_style("ticks"):
        try:
            fig = draw()
        except ValueError as err:
            raise ValueError(f"{label}: {err}") from err
        fig.set_size_inches(fig.get_size_inches() * font_scale)  # bigger text, bigger panels
        temps = []
        try:
            for out in outputs:
                out.parent.mkdir(parents=True, exist_ok=True)
                tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex[:8]}.tmp")  # same folder: atomic rename
                temps.append(tmp)
                fig.savefig(tmp, format=out.suffix.lstrip(".").lower(), dpi=options.get("dpi", 150))
            for tmp, out in zip(temps, outputs):
                os.replace(tmp, out)
        finally:
            for tmp in temps:
                tmp.unlink(missing_ok=True)
