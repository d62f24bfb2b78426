"""Figures of the trained and pretrained models (paper Figures 3, 5, 8, 11-16) and summary plots.

Drawn only from the extraction tables (see extract.py): tables["scores"], tables["intermediates"],
tables["probe"]. `ACTIVATION_FIGURES` maps a figure id to a function (tables, options) -> Figure,
the same contract as figures.FIGURES, and reuses its heatmap style: rows are queries (top =
position 0), columns are keys, invisible cells blank, one colour bar per panel, layers labelled
1-based ("Layer 1"), positions 0-based.

Options (unknown keys are ignored):
  model            fig03, fig08, fig_all_layers: the model to draw (default "nope")
  layer            fig03: 0-based layer of stages a-g (default: the lowest one in the table)
  models           fig05: models, one row each (default: every model of kind "pretrained")
  first_layers     fig05: how many layers from the first (default 4)
  compare          figC1: the two models to compare (default ["nope", "rope"])
  cmap, diverging_cmap   sequential (default "viridis") and centred (default "coolwarm") colour maps
  quantile_clip    [low, high] quantiles that bound each panel's colour scale, or None for the
                   full range; default [0.01, 0.99] for fig05 and fig_all_layers, None elsewhere
  max_columns      panels per row before wrapping (default 6)
  heatmap_max_size matrices larger than this are block-averaged to at most this many cells a side
                   for drawing (default 256; ticks keep the real positions); None to disable
"""

from __future__ import annotations

import functools
import math
import warnings

import matplotlib

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from causalpos import summary
from causalpos.figures import (
    MODEL_COLOURS,
    MODEL_LABELS,
    PANEL_SIZE,
    _new_figure,
    _require,
    draw_heatmap,
    square_matrix,
)

STAGE_TITLES = {
    "a": "(a) LN(X)",
    "b": r"(b) $QK^\top/\sqrt{d}$",
    "c": "(c) AV",
    "d": r"(d) $AVW_O$",
    "e": r"(e) $O = AVW_O + X$",
    "f": "(f) LN(O)",
    "g": r"(g) $X' = \mathrm{FFN}(\mathrm{LN}(O)) + O$",
    "h": r"(h) $\mathrm{LN}(X')$, next layer",
    "i": r"(i) $QK^\top/\sqrt{d}$, next layer",
}
SCORE_COLUMNS = ("model", "layer", "query_pos", "key_pos", "score_mean", "score_diagnorm", "seq_len")
INTERMEDIATE_COLUMNS = ("model", "layer", "stage", "query_pos", "key_pos", "value", "seq_len")
DEFAULT_CLIP = (0.01, 0.99)
DIAGNORM = "scores minus their diagonal's mean"


BUILD_DPI = 20  # see _figure
IMAGE_ABOVE = 64  # heatmaps with more rows than this are drawn as one image (see heatmap)


# ---------------------------------------------------------------- helpers


def _figure(width: float, height: float) -> Figure:
    """figures._new_figure at a low dpi while the panels are added.

    seaborn's heatmap measures its tick labels, and on the base canvas every measurement
    allocates a renderer the size of the whole figure: at 100 dpi that dominated the drawing
    time of large grids. Text and axes scale together with the dpi, so the measurement gives the
    same answer; `_built` restores matplotlib's default dpi before the figure is returned.
    """
    fig = _new_figure(width, height)
    fig.set_dpi(BUILD_DPI)
    return fig


def _built(function):
    @functools.wraps(function)
    def wrapper(tables, options):
        fig = function(tables, options)
        fig.set_dpi(matplotlib.rcParams["figure.dpi"])
        return fig
    return wrapper


def model_label(model: str) -> str:
    return MODEL_LABELS.get(model, model)


def _model_rows(table: pd.DataFrame, name: str, model: str) -> pd.DataFrame:
    rows = table[table["model"] == model]
    if rows.empty:
        raise ValueError(f"model {model!r} missing from the {name} table (it has {sorted(table['model'].unique())})")
    return rows


def _by_layer(rows: pd.DataFrame) -> dict[int, pd.DataFrame]:
    return {int(layer): group for layer, group in rows.groupby("layer", sort=True)}


def _binned(matrix: np.ndarray, max_size: int | None) -> tuple[np.ndarray, int]:
    """Block means of factor x factor cells (NaN cells ignored) so that no side exceeds max_size."""
    n = matrix.shape[0]
    if not max_size or n <= max_size:
        return matrix, 1
    factor = math.ceil(n / int(max_size))
    m = math.ceil(n / factor)
    padded = np.full((m * factor, m * factor), np.nan)
    padded[:n, :n] = matrix
    blocks = padded.reshape(m, factor, m, factor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # blocks above the diagonal are all NaN
        return np.nanmean(blocks, axis=(1, 3)), factor


def _clip_option(options: dict, default):
    clip = options.get("quantile_clip", default)
    if clip is None:
        return None
    low, high = (float(x) for x in clip)
    if not 0 <= low < high <= 1:
        raise ValueError(f"options['quantile_clip'] must be two quantiles 0 <= low < high <= 1, got {clip}")
    return low, high


def _limits(matrix: np.ndarray, clip, center: float | None):
    """Colour limits from the finite values: their full range or the clip quantiles; symmetric about center."""
    finite = matrix[np.isfinite(matrix)]
    if finite.size == 0:
        return None
    low, high = np.quantile(finite, clip) if clip else (finite.min(), finite.max())
    if center is not None:
        half = max(abs(low - center), abs(high - center)) or 1.0
        return center - half, center + half
    return (low, high) if high > low else None


def heatmap(ax, matrix: np.ndarray, cmap: str, title: str, center: float | None = None, clip=None,
            limits=None, max_size: int | None = 256) -> tuple[float, float] | None:
    """figures.draw_heatmap, plus colour limits (clip quantiles or given) and block-averaging of big matrices.

    Limits are computed on the full matrix before any block-averaging; returns the limits used.
    """
    limits = limits or _limits(matrix, clip, center)
    shown, factor = _binned(matrix, max_size)
    draw_heatmap(ax, shown, cmap, title, center=center)
    if shown.shape[0] > IMAGE_ABOVE:
        # Big matrices as one image sharing the mesh's colour map and norm (so the colour bar and
        # set_clim still apply): a rasterised mesh costs the PDF backend a full-figure raster per
        # panel, gigabytes for a 30-layer model, where an image is embedded as it is.
        mesh, n = ax.collections[0], shown.shape[0]
        ax.imshow(np.ma.masked_invalid(shown), cmap=mesh.get_cmap(), norm=mesh.norm, extent=(0, n, n, 0),
                  interpolation="nearest", zorder=mesh.get_zorder())
        mesh.set_visible(False)
        ax.set_xlim(0, n)
        ax.set_ylim(n, 0)
    if limits is not None:
        ax.collections[0].set_clim(*limits)  # the colour bar follows its mappable
    if factor > 1:  # ticks name real positions: block k starts at position k * factor
        ax.set_xticklabels([str(int(t.get_text()) * factor) for t in ax.get_xticklabels()])
        ax.set_yticklabels([str(int(t.get_text()) * factor) for t in ax.get_yticklabels()], rotation=0)
    return limits


def _max_size(options: dict):
    size = options.get("heatmap_max_size", 256)
    return int(size) if size else None


def _wrapped_panels(container, panels: list[tuple[np.ndarray, str]], ncols: int, cmap: str,
                    center: float | None, clip, max_size) -> None:
    """Heatmaps in rows of ncols panels; unused cells of the last row are hidden."""
    nrows = math.ceil(len(panels) / ncols)
    axes = np.atleast_1d(container.subplots(nrows, ncols)).ravel()
    for ax, (matrix, title) in zip(axes, panels):
        heatmap(ax, matrix, cmap, title, center=center, clip=clip, max_size=max_size)
    for ax in axes[len(panels):]:
        ax.set_axis_off()


def _grid_shape(n_panels: int, options: dict) -> tuple[int, int]:
    max_columns = int(options.get("max_columns", 6))
    if max_columns < 1:
        raise ValueError(f"options['max_columns'] must be >= 1, got {max_columns}")
    ncols = min(n_panels, max_columns)
    return math.ceil(n_panels / ncols), ncols


def _layer_panels(rows: pd.DataFrame, value: str) -> list[tuple[np.ndarray, str]]:
    return [(square_matrix(group, value), f"Layer {layer + 1}") for layer, group in _by_layer(rows).items()]


# ---------------------------------------------------------------- heatmap figures


@_built
def fig_intermediates(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Figure 3: Gram matrices of the attention intermediates (a)-(i) of one model, 3 x 3."""
    table = _require(tables, "intermediates", INTERMEDIATE_COLUMNS)
    model = options.get("model", "nope")
    rows = _model_rows(table, "intermediates", model)
    layer = options.get("layer")
    if layer is None:
        first = rows.loc[rows["stage"] == "a", "layer"]
        if first.empty:
            raise ValueError(f"intermediates table has no stage 'a' rows for model {model!r}")
        layer = int(first.min())
    layer = int(layer)
    cmap = options.get("cmap", "viridis")
    clip = _clip_option(options, None)
    fig = _figure(PANEL_SIZE[0] * 3 + 0.6, (PANEL_SIZE[1] + 0.3) * 3 + 0.4)
    fig.suptitle(f"{model_label(model)}: Gram matrices of the attention intermediates, "
                 f"Layer {layer + 1} (a-g) into Layer {layer + 2} (h-i)", fontweight="bold")
    for ax, stage in zip(fig.subplots(3, 3).ravel(), "abcdefghi"):
        stage_layer = layer + (stage in "hi")
        panel = rows[(rows["stage"] == stage) & (rows["layer"] == stage_layer)]
        if panel.empty:
            raise ValueError(f"intermediates table has no stage {stage!r} at layer {stage_layer} (0-based) "
                             f"for model {model!r}")
        heatmap(ax, square_matrix(panel, "value"), cmap, STAGE_TITLES[stage], clip=clip, max_size=_max_size(options))
    return fig


@_built
def fig_model_layers(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Figure 8: diagonal-normalised scores of every layer of one model, centred colour map."""
    table = _require(tables, "scores", SCORE_COLUMNS)
    model = options.get("model", "nope")
    panels = _layer_panels(_model_rows(table, "scores", model), "score_diagnorm")
    nrows, ncols = _grid_shape(len(panels), options)
    fig = _figure(PANEL_SIZE[0] * ncols, (PANEL_SIZE[1] + 0.3) * nrows + 0.4)
    fig.suptitle(f"{model_label(model)}: {DIAGNORM}", fontweight="bold")
    _wrapped_panels(fig, panels, ncols, options.get("diverging_cmap", "coolwarm"), 0.0,
                    _clip_option(options, None), _max_size(options))
    return fig


@_built
def fig_llms(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Figure 5: diagonal-normalised scores of the first layers of each model, one row per model,
    each panel's colour scale bounded by the 1% and 99% quantiles of its values (attention sink)."""
    table = _require(tables, "scores", SCORE_COLUMNS)
    models = list(options.get("models") or [])
    if not models:
        if "kind" not in table.columns:
            raise ValueError("scores table lacks column 'kind', needed to find the pretrained models")
        models = list(pd.unique(table.loc[table["kind"] == "pretrained", "model"]))
        if not models:
            raise ValueError("scores table has no model of kind 'pretrained' and options['models'] is empty")
    first = int(options.get("first_layers", 4))
    clip = _clip_option(options, DEFAULT_CLIP)
    rows = [(m, _layer_panels(_model_rows(table, "scores", m), "score_diagnorm")[:first]) for m in models]
    ncols = max(len(panels) for _, panels in rows)
    fig = _figure(PANEL_SIZE[0] * ncols, (PANEL_SIZE[1] + 0.3) * len(rows) + 0.4)
    scale = f", colour scale {clip[0]:.0%}-{clip[1]:.0%} quantiles" if clip else ""
    fig.suptitle(f"Pretrained models: {DIAGNORM}{scale}", fontweight="bold")
    subfigs = np.atleast_1d(fig.subfigures(len(rows), 1)).ravel()
    for sub, (model, panels) in zip(subfigs, rows):
        sub.suptitle(model_label(model), fontweight="bold")
        _wrapped_panels(sub, panels, ncols, options.get("diverging_cmap", "coolwarm"), 0.0, clip,
                        _max_size(options))
    return fig


@_built
def fig_all_layers(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Figures 11-16: every layer of one model, raw scores above and diagonal-normalised below,
    at most max_columns panels per row."""
    table = _require(tables, "scores", SCORE_COLUMNS)
    model = options.get("model", "nope")
    rows = _model_rows(table, "scores", model)
    clip = _clip_option(options, DEFAULT_CLIP)
    raw, normed = _layer_panels(rows, "score_mean"), _layer_panels(rows, "score_diagnorm")
    nrows, ncols = _grid_shape(len(raw), options)
    block_height = (PANEL_SIZE[1] + 0.3) * nrows + 0.4
    fig = _figure(PANEL_SIZE[0] * ncols, 2 * block_height)
    scale = f" (colour scale {clip[0]:.0%}-{clip[1]:.0%} quantiles)" if clip else ""
    blocks = [(f"{model_label(model)}: attention scores{scale}", raw, options.get("cmap", "viridis"), None),
              (f"{model_label(model)}: {DIAGNORM}{scale}", normed, options.get("diverging_cmap", "coolwarm"), 0.0)]
    for sub, (title, panels, cmap, center) in zip(fig.subfigures(2, 1), blocks):
        sub.suptitle(title, fontweight="bold")
        _wrapped_panels(sub, panels, ncols, cmap, center, clip, _max_size(options))
    return fig


@_built
def fig_nope_vs_rope(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """NoPE against RoPE, one row per layer: raw scores of each, diagonal-normalised scores of each
    (shared colour scale within a layer) and their difference (first minus second)."""
    table = _require(tables, "scores", SCORE_COLUMNS)
    first, second = list(options.get("compare") or ["nope", "rope"])
    a, b = (_by_layer(_model_rows(table, "scores", m)) for m in (first, second))
    layers = sorted(set(a) & set(b))
    if not layers:
        raise ValueError(f"models {first!r} and {second!r} share no layer")
    if a[layers[0]]["seq_len"].iloc[0] != b[layers[0]]["seq_len"].iloc[0]:
        raise ValueError(f"models {first!r} and {second!r} have different seq_len; cannot subtract")
    la, lb = model_label(first), model_label(second)
    headers = [f"{la}: scores", f"{lb}: scores", f"{la}: diag.-normalised", f"{lb}: diag.-normalised",
               f"{la} − {lb},\ndiag.-normalised"]
    cmap, diverging = options.get("cmap", "viridis"), options.get("diverging_cmap", "coolwarm")
    clip, size = _clip_option(options, None), _max_size(options)
    fig = _figure(PANEL_SIZE[0] * 5, (PANEL_SIZE[1] + 0.3) * len(layers) + 0.8)
    fig.suptitle(f"{la} vs {lb}: diag.-normalised = {DIAGNORM}; the two diag.-normalised panels of a layer "
                 "share one colour scale", fontweight="bold")
    grid = np.atleast_2d(fig.subplots(len(layers), 5))
    for row, layer in enumerate(layers):
        titles = [f"{h}\nLayer {layer + 1}" if row == 0 else f"Layer {layer + 1}" for h in headers]
        norm_a, norm_b = square_matrix(a[layer], "score_diagnorm"), square_matrix(b[layer], "score_diagnorm")
        ax = grid[row]
        heatmap(ax[0], square_matrix(a[layer], "score_mean"), cmap, titles[0], clip=clip, max_size=size)
        heatmap(ax[1], square_matrix(b[layer], "score_mean"), cmap, titles[1], clip=clip, max_size=size)
        shared = _limits(np.concatenate([norm_a.ravel(), norm_b.ravel()]), clip, 0.0)
        heatmap(ax[2], norm_a, diverging, titles[2], center=0.0, limits=shared, max_size=size)
        heatmap(ax[3], norm_b, diverging, titles[3], center=0.0, limits=shared, max_size=size)
        heatmap(ax[4], norm_a - norm_b, diverging, titles[4], center=0.0, clip=clip, max_size=size)
    return fig


# ---------------------------------------------------------------- summary plots


def _colours(models) -> dict:
    others = [m for m in models if m not in MODEL_COLOURS]
    palette = sns.color_palette("Dark2", max(len(others), 1))
    return {m: MODEL_COLOURS.get(m) or palette[others.index(m)] for m in models}


def _style_legend(ax, models, colours, styles: list[tuple[str, str]]) -> None:
    handles = [Line2D([], [], color=colours[m], lw=2, label=model_label(m)) for m in models]
    handles += [Line2D([], [], color="black", ls=ls, label=label) for ls, label in styles]
    ax.legend(handles=handles, fontsize="small")


def _layer_axis(ax, xlabel: str = "Layer") -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)


def _summary_models(frame: pd.DataFrame) -> list[str]:
    return list(pd.unique(frame["model"]))


@_built
def fig_nonrelativeness(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Per layer and model: the non-relativeness index, the left-region deficit and the size of the
    pattern against the raw scores (summary.nonrelativeness); solid = every key, dashed = without key 0."""
    table = _require(tables, "scores", summary.SCORE_NEEDS)
    stats = summary.nonrelativeness(table)
    models = _summary_models(stats)
    colours = _colours(models)
    fig = _figure(16, 4.4)
    ax_index, ax_deficit, ax_scale = fig.subplots(1, 3)
    for model in models:
        rows = stats[stats["model"] == model].sort_values("layer")
        x, c = rows["layer"] + 1, colours[model]
        ax_index.plot(x, rows["index"], "o-", color=c, ms=4)
        ax_index.plot(x, rows["index_no_sink"], "s--", color=c, ms=3)
        ax_index.plot(x, rows["index_noise"], ":", color=c, lw=1)
        ax_deficit.plot(x, rows["deficit"], "o-", color=c, ms=4)
        ax_deficit.plot(x, rows["deficit_no_sink"], "s--", color=c, ms=3)
        ax_scale.plot(x, rows["score_std"], "o-", color=c, ms=4)
        ax_scale.plot(x, rows["pattern_std"], "s--", color=c, ms=3)
    ax_index.axhline(0.0, color="grey", lw=0.8)
    ax_index.set_ylabel("Var(diag.-normalised) / Var(scores)")
    ax_index.set_title("Non-relativeness index (0 = relative)")
    _style_legend(ax_index, models, colours, [("-", "all keys"), ("--", "without key 0"),
                                              (":", "sampling-noise floor")])
    ax_deficit.axhline(0.0, color="grey", lw=0.8)
    ax_deficit.set_ylabel("Mean diag.-normalised score, left region")
    ax_deficit.set_title("Left-region deficit (< 0: left darker)")
    _style_legend(ax_deficit, models, colours, [("-", "all keys"), ("--", "without key 0")])
    ax_scale.set_ylim(bottom=0)
    ax_scale.set_ylabel("Standard deviation (off-diagonal)")
    ax_scale.set_title("Size: raw scores vs pattern")
    _style_legend(ax_scale, models, colours, [("-", "raw scores"), ("--", "diag.-normalised")])
    for ax in (ax_index, ax_deficit, ax_scale):
        _layer_axis(ax)
    return fig


@_built
def fig_increasing_fraction(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Per layer and model: share of adjacent off-diagonal key steps where the nearer key scores
    higher (summary.increasing_fraction), ± SEM; solid = every key, dashed = without key 0."""
    table = _require(tables, "scores", summary.SCORE_NEEDS)
    stats = summary.increasing_fraction(table)
    models = _summary_models(stats)
    colours = _colours(models)
    fig = _figure(7.5, 4.6)
    ax = fig.subplots()
    for model in models:
        rows = stats[stats["model"] == model].sort_values("layer")
        x, c = rows["layer"] + 1, colours[model]
        ax.errorbar(x, rows["fraction"], yerr=rows["fraction_sem"], fmt="o-", ms=4, capsize=2, color=c)
        ax.errorbar(x + 0.1, rows["fraction_no_sink"], yerr=rows["fraction_no_sink_sem"], fmt="s--", ms=3,
                    capsize=2, color=c)
    ax.axhline(0.5, color="grey", lw=0.8)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("Fraction of steps j → j+1 with higher score")
    ax.set_title("Nearer keys score higher (0.5 = no preference)")
    _style_legend(ax, models, colours, [("-", "all keys"), ("--", "without key 0")])
    _layer_axis(ax)
    return fig


@_built
def fig_position_probe(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Per hidden state and model: held-out MAE of the linear position probe and of the mean-position
    baseline (positions), and their ratio (1 = no positional information)."""
    table = _require(tables, "probe", summary.PROBE_NEEDS)
    stats = summary.probe_summary(table)
    models = _summary_models(stats)
    colours = _colours(models)
    fig = _figure(12, 4.4)
    ax_mae, ax_ratio = fig.subplots(1, 2)
    for model in models:
        rows = stats[stats["model"] == model].sort_values("layer")
        c = colours[model]
        ax_mae.plot(rows["layer"], rows["mae"], "o-", ms=4, color=c)
        ax_mae.plot(rows["layer"], rows["mae_baseline"], ":", color=c)
        ax_ratio.plot(rows["layer"], rows["ratio"], "o-", ms=4, color=c)
    xlabel = "Hidden state (0 = embeddings, k = output of Layer k)"
    ax_mae.set_ylabel("Held-out mean absolute error (positions)")
    ax_mae.set_title("Linear position probe")
    _style_legend(ax_mae, models, colours, [("-", "probe"), (":", "mean-position baseline")])
    ax_ratio.axhline(1.0, color="grey", lw=0.8)
    ax_ratio.set_ylim(bottom=0)
    ax_ratio.set_ylabel("Probe MAE / baseline MAE")
    ax_ratio.set_title("Relative error (1 = no positional information)")
    _style_legend(ax_ratio, models, colours, [])
    for ax in (ax_mae, ax_ratio):
        _layer_axis(ax, xlabel)
    return fig


ACTIVATION_FIGURES = {
    "fig03_intermediates": fig_intermediates,
    "fig05_llms": fig_llms,
    "fig08_model_layers": fig_model_layers,
    "fig_all_layers": fig_all_layers,
    "figC1_nope_vs_rope": fig_nope_vs_rope,
    "figM1_nonrelativeness": fig_nonrelativeness,
    "figM2_increasing_fraction": fig_increasing_fraction,
    "figM3_position_probe": fig_position_probe,
}
