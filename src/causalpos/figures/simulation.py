"""Figures of the parameter-free decoder (paper Figures 1, 2, 4, 6, 7, 9, 10) and figure S1.

Drawn from the simulation and theory tables; each is a function (tables, options) -> Figure.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from causalpos.figures.style import MAX_ASPECT, PANEL_SIZE, draw_heatmap, new_figure, square_matrix
from causalpos.simulation import theory as closed_form
from causalpos.tables import require_columns
from causalpos.tril import packed_size

PARAMS = ("norm", "scale", "alpha", "pe", "rope_theta", "mask", "residual", "seq_len")
GRID_COLUMNS = ("variant", "layer", "query_pos", "key_pos", "score_mean") + PARAMS


# ---------------------------------------------------------------- helpers




def layer_matrix(table: pd.DataFrame, variant: str, layer: int, value: str = "score_mean") -> np.ndarray:
    """One layer of one variant as an n x n array [query_pos, key_pos]; NaN where no row (invisible)."""
    rows = table[(table["variant"] == variant) & (table["layer"] == layer)]
    if rows.empty:
        raise ValueError(f"no rows for variant {variant!r}, layer {layer}")
    return square_matrix(rows, value, f"variant {variant!r}")






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




def _select(simulation: pd.DataFrame | None, options: dict, columns) -> tuple[pd.DataFrame, list[str]]:
    """The rows of the variants named in options['variants'], after checking columns and names."""
    require_columns(simulation, columns, "simulation", allow_empty=True)
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


def blocks_per_line(n_blocks: int, block_width: float, block_height: float) -> int:
    """How many blocks (a labelled row of panels each) to set side by side so that the figure's
    height / width stays under MAX_ASPECT: one per line unless that makes the figure too tall."""
    for per_line in range(1, n_blocks + 1):
        if math.ceil(n_blocks / per_line) * block_height <= MAX_ASPECT * per_line * block_width:
            return per_line
    return max(n_blocks, 1)


def _layer_grid(rows: list[tuple[str, list[np.ndarray], str, float | None]]) -> Figure:
    """One block of heatmaps per (label, matrices by layer, cmap, centre); columns of a block are layers.
    Blocks stack in reading order, two or more to a line where one per line would be too tall for the report."""
    ncols = max(len(mats) for _, mats, _, _ in rows)
    block = (PANEL_SIZE[0] * ncols, PANEL_SIZE[1] + 0.3)
    per_line = blocks_per_line(len(rows), *block)
    lines = math.ceil(len(rows) / per_line)
    fig = new_figure(block[0] * per_line, block[1] * lines)
    subfigs = np.atleast_1d(fig.subfigures(lines, per_line)).ravel()
    for sub in subfigs[len(rows):]:
        sub.set_visible(False)
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
        if len(corner) == packed_size(n):
            scores2[corner["query_pos"].to_numpy(int), corner["key_pos"].to_numpy(int)] = corner["score"]
    panels = [
        (scores1, "(a) Layer-1 scores"),
        (attention1, "(b) Layer-1 attention"),
        (gram1, "(c) Gram of $x^{(1)}$: $h(i)^2$, $g(i)$"),
        (scores2, "(d) Layer-2 scores $g(i)/(h(i)h(j))$"),
    ]
    fig = new_figure(3.6 * 4, PANEL_SIZE[1] + 0.4)
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

    fig = new_figure(11.0, 4.2)
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












# ---------------------------------------------------------------- entry point




