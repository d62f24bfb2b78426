"""Figures of the parameter-free decoder (paper Figures 1, 2, 4, 6, 7, 9, 10), figure S1 and figure R1.

Drawn from the simulation, theory and recursion tables; each is a function (tables, options) -> Figure.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from causalpos.figures.style import (
    HEATMAP_W_PAD,
    MAX_ASPECT,
    PANEL_SIZE,
    diagnorm_style,
    difference_cmap,
    draw_heatmap,
    fixed_limits,
    heatmap,
    name_axes_once,
    new_figure,
    score_cmap,
    suptitle,
    tick_step,
)
from causalpos.matrices import maps
from causalpos.simulation import theory as closed_form
from causalpos.catalogue.tables import require_columns
from causalpos.tril import packed_size

PARAMS = ("norm", "scale", "alpha", "pe", "rope_theta", "mask", "residual", "seq_len")
BLOCK_HEIGHT = PANEL_SIZE[1] + 0.1  # inches of a line of panels with its label (the key axis: last line only)
GRID_COLUMNS = ("variant", "layer", "query_pos", "key_pos", "score_mean") + PARAMS


# ---------------------------------------------------------------- helpers


def layer_matrix(table: pd.DataFrame, variant: str, layer: int, value: str = "score_mean") -> np.ndarray:
    """One layer of one variant as an n x n array [query_pos, key_pos]; NaN where no row (invisible)."""
    rows = table[(table["variant"] == variant) & (table["layer"] == layer)]
    if rows.empty:
        raise ValueError(f"no rows for variant {variant!r}, layer {layer}")
    return maps(rows, value, label=f"variant {variant!r}")


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
    if not pd.isna(params.get("window")):  # a sliding window (absent from older tables)
        parts.append(f"window {int(params['window'])}")
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
    """How many blocks (a labelled row of panels each) to set side by side: the narrowest figure whose
    height / width stays under MAX_ASPECT once blocks are widened to it (the report shows every figure
    equally wide, so the narrowest figure has the largest text)."""

    def width(per_line: int) -> float:
        return max(per_line * block_width, math.ceil(n_blocks / per_line) * block_height / MAX_ASPECT)

    return min(range(1, max(n_blocks, 1) + 1), key=lambda per_line: (width(per_line), per_line))


class Block(NamedTuple):
    """A labelled row of heatmaps, one per layer: its colour map, centre and fixed limits (None: own range)."""

    label: str
    matrices: list
    cmap: str
    center: float | None = None
    limits: tuple[float, float] | None = None


def block_figure(n_blocks: int, size: tuple[float, float]):
    """A figure of n_blocks subfigures of `size` inches each, blocks_per_line of them to a line and widened to
    MAX_ASPECT where needed; returns (figure, the blocks' subfigures in reading order, blocks per line)."""
    per_line = blocks_per_line(n_blocks, *size)
    lines = math.ceil(n_blocks / per_line)
    fig = new_figure(max(size[0] * per_line, size[1] * lines / MAX_ASPECT), size[1] * lines, HEATMAP_W_PAD)
    subfigs = np.atleast_1d(fig.subfigures(lines, per_line)).ravel()
    for sub in subfigs[n_blocks:]:
        sub.set_visible(False)
    return fig, subfigs[:n_blocks], per_line


def _layer_grid(blocks: list[Block]) -> Figure:
    """One row of heatmaps per Block; columns of a block are layers. Blocks stack in reading order, widened (or
    set two or more to a line) where one per line would be too tall for the report (blocks_per_line)."""
    ncols = max(len(block.matrices) for block in blocks)
    fig, subfigs, per_line = block_figure(len(blocks), (PANEL_SIZE[0] * ncols, BLOCK_HEIGHT))
    for index, (sub, block) in enumerate(zip(subfigs, blocks)):
        suptitle(sub, block.label, fontweight="bold")
        axes = np.atleast_1d(sub.subplots(1, ncols)).ravel()
        for layer, ax in enumerate(axes):
            if layer < len(block.matrices):
                heatmap(
                    ax,
                    block.matrices[layer],
                    block.cmap,
                    f"Layer {layer + 1}",
                    center=block.center,
                    limits=block.limits,
                    max_size=None,
                )
                name_axes_once(ax, layer == 0, index >= len(blocks) - per_line)
            else:
                ax.set_axis_off()
    return fig


def self_score(params) -> float:
    """A token's score with itself, <y, y> / scale with |y|^2 = 1 (l2) or d (LayerNorm): the diagonal of every
    layer and, by Cauchy-Schwarz, the largest score. The paper's raw panels span [0, self_score] (0-1 for l2 and
    LayerNorm with d scaling, 0-sqrt(d) for LayerNorm with sqrt(d) scaling)."""
    d = float(params["d"])
    norm_sq = 1.0 if params["norm"] == "l2" else d
    return norm_sq / {"none": 1.0, "sqrt_d": math.sqrt(d), "d": d}[params["scale"]]


def raw_limits(params, options: dict) -> tuple[float, float] | None:
    return (0.0, self_score(params)) if fixed_limits(options) else None


# ---------------------------------------------------------------- figures


def mechanism_panels(n: int, alpha: float, theory: pd.DataFrame | None = None) -> list[tuple[np.ndarray, str]]:
    """The four panels of Figure 1 on n tokens, [row, column], 0 above the diagonal:
    (a) layer-1 scores <x_i, x_j> (1 on the diagonal, alpha in expectation elsewhere);
    (b) x_i^(1) = sum_j A_ij x_j + x_i as the weight of each input x_j (row i);
    (c) y_i^(2) = x_i^(1) / h(i), the same weights after l2 normalisation;
    (d) layer-2 scores <y_i^(2), y_j^(2)> = g(i) / (h(i) h(j)) (Eq. 4; from the theory table where it has them)."""
    below = np.tril(np.ones((n, n), dtype=bool), k=-1)
    scores1 = np.where(below, alpha, np.eye(n))
    weights1 = closed_form.layer1_attention(n, alpha) + np.eye(n)  # attention, then the residual
    norms = closed_form.h(np.arange(1, n + 1), alpha)
    scores2 = closed_form.layer2_scores(n, alpha)
    if theory is not None:  # use the table's top-left corner: g and h do not depend on seq_len
        corner = theory[
            np.isclose(theory["alpha"], alpha)
            & theory["residual"].astype(bool)
            & (theory["query_pos"] < n)
            & (theory["key_pos"] <= theory["query_pos"])
        ]
        if len(corner) == packed_size(n):
            scores2[corner["query_pos"].to_numpy(int), corner["key_pos"].to_numpy(int)] = corner["score"]
    return [
        # two lines each: on one, (c)'s and (d)'s titles ran over the colour bar of the panel to their left
        (scores1, "(a) Layer-1\nscores"),
        (weights1, "(b) $x^{(1)}_i$:\nweight of $x_j$"),
        (weights1 / norms[:, None], "(c) $y^{(2)}_i$ (normalised):\nweight of $x_j$"),
        (scores2, "(d) Layer-2 scores\n$g(i)/(h(i)h(j))$"),
    ]


def fig_mechanism(tables: dict, options) -> Figure:
    """Figure 1: the mechanism on three tokens, from layer-1 scores to layer-2 scores, values annotated."""
    alpha = float(options.get("alpha", 0.0))
    n = 3
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    fig = new_figure(PANEL_SIZE[0] * 4, PANEL_SIZE[1] + 0.4, HEATMAP_W_PAD)
    suptitle(fig, f"How the causal mask creates positional information, α = {alpha:g}", fontweight="bold")
    for k, (ax, (matrix, title)) in enumerate(
        zip(fig.subplots(1, 4), mechanism_panels(n, alpha, tables.get("theory")))
    ):
        draw_heatmap(ax, np.where(upper, np.nan, matrix), score_cmap(options), title, annot=True)
        if k in (1, 2):  # rows are positions i, columns the inputs x_j they are made of
            ax.set_xlabel("Input $x_j$, j")
            ax.set_ylabel("Position i")
    return fig


def fig_layer_grid(tables: dict, options) -> Figure:
    """Figures 2, 6, 7: rows are variants, columns are layers, raw mean scores."""
    table, names = _select(tables.get("simulation"), options, GRID_COLUMNS + ("d",))
    blocks = []
    for name in names:
        params = _params(table, name)
        mats = [layer_matrix(table, name, layer) for layer in range(_n_layers(table, name))]
        blocks.append(Block(variant_label(params), mats, score_cmap(options), None, raw_limits(params, options)))
    return _layer_grid(blocks)


def fig_rope(tables: dict, options) -> Figure:
    """Figures 4, 9, 10: per variant, raw scores then diagonal-normalised scores, columns are layers."""
    table, names = _select(tables.get("simulation"), options, GRID_COLUMNS + ("d", "score_diagnorm"))
    cmap, center = diagnorm_style(options)
    blocks = []
    for name in names:
        params = _params(table, name)
        label = variant_label(params)
        layers = range(_n_layers(table, name))
        blocks.append(
            Block(
                f"{label}: scores",
                [layer_matrix(table, name, k) for k in layers],
                score_cmap(options),
                None,
                raw_limits(params, options),
            )
        )
        blocks.append(
            Block(
                f"{label}: scores minus their diagonal's mean",
                [layer_matrix(table, name, k, "score_diagnorm") for k in layers],
                cmap,
                center,
            )
        )
    return _layer_grid(blocks)


def fig_mc_vs_closed_form(tables: dict, options) -> Figure:
    """Figure S1: layer-2 Monte Carlo scores against Eq. 4 as the hidden size d grows."""
    theory = tables.get("theory")
    table, names = _select(tables.get("simulation"), options, GRID_COLUMNS + ("score_sem", "d", "n_layers"))
    if theory is None:
        raise ValueError("this figure needs the theory table, got None")
    params = table.drop_duplicates("variant").set_index("variant").loc[names]
    wrong = params[
        (params["norm"] != "l2")
        | (params["scale"] != "none")
        | (params["pe"] != "none")
        | (params["mask"] != "causal")
        | (params["n_layers"] < 2)
    ].index.tolist()
    if wrong:
        raise ValueError(
            f"variant(s) {wrong} are not l2/no scaling/no PE/causal with >= 2 layers: the closed form does not apply"
        )
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
        raise ValueError(
            f"theory table has no closed form for alpha = {alpha:g}, residual = {residual} at every pair of seq_len {n}"
        )
    mc = mc.assign(error=(mc["score_mean"] - mc["closed_form"]).abs())

    fig = new_figure(11.0, 4.2)
    left, right = fig.subplots(1, 2)
    order = params.sort_values("d").index.tolist()
    colours = sns.color_palette("viridis", len(order))
    last = mc[mc["query_pos"] == n - 1]
    for k, (name, colour) in enumerate(zip(order, colours)):
        rows = last[last["variant"] == name].sort_values("key_pos")
        shift = 0.5 * (k - (len(order) - 1) / 2) / len(order)  # small offset so error bars do not overlap
        left.errorbar(
            rows["key_pos"] + shift,
            rows["score_mean"],
            yerr=rows["score_sem"],
            fmt="o",
            ms=3,
            capsize=2,
            lw=1,
            color=colour,
            label=f"d = {params.loc[name, 'd']}",
        )
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
    # the three curves fall with d, so the top right is theirs only when the axis ends at their maximum: half
    # the axis's decades more above them keep the legend there off the data, whatever the Monte Carlo drew
    low, high = right.get_ylim()
    right.set_ylim(low, high * (high / low) ** 0.5)
    right.legend(fontsize="small", loc="upper right")
    return fig


# ---------------------------------------------------------------- Monte Carlo against the large-d recursion


RECURSION_NEEDS = ("variant", "layer", "query_pos", "key_pos", "score", "seq_len")
RECURSION_ROWS = ("Monte Carlo", "Recursion (d → ∞)", "MC − recursion")
# inches of one panel of figR1, and what a block adds: its title, the layer titles, the key axis (height), the query
# axis and the two colour bars (width). Two blocks of four layers fit a line the report shows with 8 px text.
RECURSION_PANEL = 1.45
RECURSION_EXTRA = (1.3, 0.9)
SAME_SETTINGS = ("norm", "scale", "alpha", "pe", "rope_theta", "mask", "residual", "seq_len", "d", "n_layers", "window")


def _same_settings(sim: pd.Series, rec: pd.Series) -> bool:
    def same(a, b) -> bool:
        return (pd.isna(a) and pd.isna(b)) if pd.isna(a) or pd.isna(b) else a == b

    return all(same(sim[key], rec[key]) for key in SAME_SETTINGS if key in sim.index and key in rec.index)


def recursion_panels(simulation: pd.DataFrame, recursion: pd.DataFrame, variant: str) -> list[list[np.ndarray]]:
    """[Monte Carlo, recursion, Monte Carlo - recursion] of one variant, each a list of [query, key] matrices per
    layer (NaN where the key is hidden): the simulation's score_mean and the recursion's score (its large-d limit)."""
    layers = range(_n_layers(simulation, variant))
    mc = [layer_matrix(simulation, variant, k) for k in layers]
    limit = [layer_matrix(recursion, variant, k, "score") for k in layers]
    return [mc, limit, [a - b for a, b in zip(mc, limit)]]


def _recursion_block(sub, label: str, panels: list, score_limits, cmap: str, diverging: str) -> None:
    """One variant: rows Monte Carlo, recursion, their difference; columns layers; one colour bar for the two
    score rows (one range) and one for the difference (centred at 0, the same for every layer)."""
    suptitle(sub, label, fontweight="bold")
    n_layers = len(panels[0])
    axes = np.atleast_2d(sub.subplots(3, n_layers, sharex=True, sharey=True, squeeze=False))
    finite = np.concatenate([m[np.isfinite(m)] for m in panels[2]])
    half = float(np.abs(finite).max()) if finite.size else 0.0
    limits = [score_limits, score_limits, (-(half or 1.0), half or 1.0)]
    images = []
    for row, (name, matrices) in enumerate(zip(RECURSION_ROWS, panels)):
        for layer, (ax, matrix) in enumerate(zip(axes[row], matrices)):
            n = matrix.shape[0]
            image = ax.imshow(
                np.ma.masked_invalid(matrix),
                cmap=cmap if row < 2 else diverging,
                vmin=limits[row][0],
                vmax=limits[row][1],
                interpolation="nearest",
                rasterized=True,
            )
            ticks = np.arange(0, n, tick_step(n))
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_yticks(ticks, [str(t) for t in ticks])
            if row == 0:
                ax.set_title(f"Layer {layer + 1}")
            if row == 2:
                ax.set_xlabel("Key position")
            if layer == 0:
                ax.set_ylabel(f"{name}\nquery position")
            ax.tick_params(labelbottom=row == 2, labelleft=layer == 0)
        images.append(image)
    sub.colorbar(images[0], ax=list(axes[:2].ravel()), label="Score", fraction=0.05, aspect=25)
    sub.colorbar(images[2], ax=list(axes[2]), label="Difference", fraction=0.05, aspect=12)


def fig_recursion(tables: dict, options) -> Figure:
    """figR1: per variant, every layer's Monte Carlo mean scores beside the large-d recursion's (same colour range:
    the paper's fixed one, raw_limits) and their difference (centred at 0). Variants are blocks, two to a line
    where one per line would be too tall for the report."""
    simulation, names = _select(tables.get("simulation"), options, GRID_COLUMNS + ("d", "n_layers"))
    recursion = require_columns(tables.get("recursion"), RECURSION_NEEDS, "recursion")
    absent = [v for v in names if v not in set(recursion["variant"])]
    if absent:
        raise ValueError(f"variant(s) {absent} missing from the recursion table")
    blocks = []
    for name in names:
        params = _params(simulation, name)
        if not _same_settings(params, _params(recursion, name)):
            raise ValueError(
                f"variant {name!r}: the recursion table was made with other settings than the "
                "simulation's; rerun rule recursion"
            )
        panels = recursion_panels(simulation, recursion, name)
        limits = raw_limits(params, options)
        if limits is None:  # colour_limits "panel": both score rows on their own common range
            values = np.concatenate([m[np.isfinite(m)] for m in panels[0] + panels[1]])
            limits = (float(values.min()), float(values.max()))
        blocks.append((variant_label(params), panels, limits))
    n_layers = max(len(panels[0]) for _, panels, _ in blocks)
    size = (RECURSION_PANEL * n_layers + RECURSION_EXTRA[0], RECURSION_PANEL * 3 + RECURSION_EXTRA[1])
    fig, subfigs, _ = block_figure(len(blocks), size)
    for sub, (label, panels, limits) in zip(subfigs, blocks):
        _recursion_block(sub, label, panels, limits, score_cmap(options), difference_cmap(options))
    return fig


# ---------------------------------------------------------------- entry point
