"""Heatmaps of the trained and pretrained models: paper Figures 3, 5, 8, 11-16, NoPE against RoPE.

Drawn only from the extraction tables (columns in causalpos.catalogue.tables): tables["scores"], tables["intermediates"],
tables["probe"]. Each figure is a function (tables, options) -> Figure (see figures.render), in the
heatmap style of figures.style: rows are queries (top =
position 0), columns are keys, invisible cells blank, one colour bar per panel, layers labelled
1-based ("Layer 1"), positions 0-based.

Options (unknown keys are ignored):
  model            fig03, fig08, fig_all_layers: the model to draw (default "nope")
  kind, layers     fig_all_layers: "raw" or "diagnorm" and the 0-based layers of one page (all_layers_pages)
  layers_per_page  fig_all_layers: most layers on a page (default 8)
  layer            fig03: 0-based layer of stages a-g (default: the lowest one in the table)
  models           fig05: models, one row each (default: every model of kind "pretrained")
  first_layers     fig05: how many layers from the first (default 4)
  compare          figC1: the two models to compare (default ["nope", "rope"])
  cmap             colour map of every score map (default: the paper's "rocket")
  diverging_cmap   colour map of differences (figC1's third row; default "coolwarm")
  centred_diagnorm diagonal-normalised scores on limits symmetric about 0 in diverging_cmap (default False:
                   the paper's own range in cmap)
  model_labels     {model: name in titles} (the workflow's config.model_labels; default: the key)
  quantile_clip    [low, high] quantiles that bound each panel's colour scale, or None for the
                   full range; default [0.01, 0.99] for fig05 and fig_all_layers, None elsewhere
  max_columns      panels per row before wrapping (default 4, PAGE_COLUMNS: a row stays readable in the report)
  heatmap_max_size matrices larger than this are block-averaged to at most this many cells a side
                   for drawing (default 256; ticks keep the real positions); None to disable
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from causalpos.figures.style import (
    HEATMAP_W_PAD,
    MAX_ASPECT,
    PANEL_SIZE,
    build_figure,
    built,
    clip_option,
    colour_limits,
    diagnorm_style,
    difference_cmap,
    heatmap,
    max_size_option,
    model_label,
    name_axes_once,
    require_table,
    score_cmap,
    suptitle,
)
from causalpos.matrices import maps
from causalpos.catalogue.models import NOPE, PRETRAINED_KIND, TRAINED
from causalpos.catalogue.tables import FIGURE3_STAGES

# the columns each figure reads
SCORE_NEEDS = ("model", "layer", "query_pos", "key_pos", "score_mean", "score_diagnorm", "seq_len", "n_sequences")
INTERMEDIATE_NEEDS = ("model", "layer", "stage", "query_pos", "key_pos", "value", "seq_len")
DEFAULT_CLIP = (0.01, 0.99)
DIAGNORM = "scores minus their diagonal's mean"


# ---------------------------------------------------------------- helpers


def _model_rows(table: pd.DataFrame, name: str, model: str) -> pd.DataFrame:
    rows = table[table["model"] == model]
    if rows.empty:
        raise ValueError(f"model {model!r} missing from the {name} table (it has {sorted(table['model'].unique())})")
    return rows


def _by_layer(rows: pd.DataFrame) -> dict[int, pd.DataFrame]:
    return {int(layer): group for layer, group in rows.groupby("layer", sort=True)}


def _wrapped_panels(
    container, panels: list[tuple[np.ndarray, str]], ncols: int, cmap: str, center: float | None, clip, max_size
) -> None:
    """Heatmaps in rows of ncols panels; unused cells of the last row are hidden. Only the first column
    names the query axis and only the bottom panel of each column the key axis."""
    nrows = math.ceil(len(panels) / ncols)
    axes = np.atleast_1d(container.subplots(nrows, ncols)).ravel()
    for k, (ax, (matrix, title)) in enumerate(zip(axes, panels)):
        heatmap(ax, matrix, cmap, title, center=center, clip=clip, max_size=max_size)
        name_axes_once(ax, k % ncols == 0, k + ncols >= len(panels))
    for ax in axes[len(panels) :]:
        ax.set_axis_off()


def _grid_shape(n_panels: int, options: dict) -> tuple[int, int]:
    max_columns = int(options.get("max_columns", PAGE_COLUMNS))
    if max_columns < 1:
        raise ValueError(f"options['max_columns'] must be >= 1, got {max_columns}")
    ncols = min(n_panels, max_columns)
    return math.ceil(n_panels / ncols), ncols


def _layer_panels(rows: pd.DataFrame, value: str) -> list[tuple[np.ndarray, str]]:
    return [(maps(group, value), f"Layer {layer + 1}") for layer, group in _by_layer(rows).items()]


def averaged_over(rows: pd.DataFrame) -> str:
    """What a model's mean scores average: "64 sequences of 256 tokens" (and every head)."""
    return f"{int(rows['n_sequences'].max()):,} sequences of {int(rows['seq_len'].max()):,} tokens"


def clip_text(clip) -> str:
    return f"colour scale: the {clip[0]:.0%} and {clip[1]:.0%} quantiles of each panel" if clip else ""


def stage_title(stage: str) -> str:
    """A Figure 3 panel's title (tables.FIGURE3_STAGES), in two lines where one is wider than a panel."""
    title = FIGURE3_STAGES[stage][1].replace(", next layer", "\n(next layer)")
    return title.replace("$X' = ", "$X'$ =\n$") if stage == "g" else title


# ---------------------------------------------------------------- heatmap figures


@built
def fig_intermediates(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Figure 3: Gram matrices of the attention intermediates (a)-(i) of one model, 2 rows of 5."""
    table = require_table(tables, "intermediates", INTERMEDIATE_NEEDS)
    model = options.get("model", NOPE)
    rows = _model_rows(table, "intermediates", model)
    layer = options.get("layer")
    if layer is None:
        first = rows.loc[rows["stage"] == "a", "layer"]
        if first.empty:
            raise ValueError(f"intermediates table has no stage 'a' rows for model {model!r}")
        layer = int(first.min())
    layer = int(layer)
    clip = clip_option(options, None)
    # 2 rows of 5 (not the paper's 3 x 3): wider than tall, so the report shows it whole; narrower panels than
    # elsewhere, so that its text is as large as the other figures' in the report
    fig = build_figure(PANEL_SIZE[0] * 4.5, (PANEL_SIZE[1] + 0.3) * 2 + 0.6, HEATMAP_W_PAD)
    suptitle(
        fig,
        f"{model_label(model, options)}: Gram matrices of the attention intermediates, "
        f"Layer {layer + 1} (a-g) into Layer {layer + 2} (h-i)",
        fontweight="bold",
    )
    axes = fig.subplots(2, 5).ravel()
    axes[-1].set_axis_off()
    for ax, stage in zip(axes, "abcdefghi"):
        stage_layer = layer + (stage in "hi")
        panel = rows[(rows["stage"] == stage) & (rows["layer"] == stage_layer)]
        if panel.empty:
            raise ValueError(
                f"intermediates table has no stage {stage!r} at layer {stage_layer} (0-based) for model {model!r}"
            )
        heatmap(
            ax,
            maps(panel, "value"),
            score_cmap(options),
            stage_title(stage),
            clip=clip,
            max_size=max_size_option(options),
        )
        name_axes_once(ax, stage in "af", last_row=True)  # (a) and (f) begin the two rows
    return fig


@built
def fig_model_layers(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Figure 8: the scores of every layer of one model as the paper draws them (raw, each panel its own
    range), then the same diagonal-normalised."""
    table = require_table(tables, "scores", SCORE_NEEDS)
    model = options.get("model", NOPE)
    rows = _model_rows(table, "scores", model)
    kinds = [(score_cmap(options), None, "scores", _layer_panels(rows, "score_mean"))]
    cmap, center = diagnorm_style(options)
    kinds.append((cmap, center, DIAGNORM, _layer_panels(rows, "score_diagnorm")))
    nrows, ncols = _grid_shape(len(kinds[0][3]), options)
    height = ((PANEL_SIZE[1] + 0.3) * nrows + 0.4) * 2 + 0.4
    fig = build_figure(max(PANEL_SIZE[0] * ncols, height / MAX_ASPECT), height, HEATMAP_W_PAD)
    suptitle(fig, f"{model_label(model, options)}: every layer ({averaged_over(rows)})", fontweight="bold")
    for sub, (cmap, center, what, panels) in zip(np.atleast_1d(fig.subfigures(2, 1)).ravel(), kinds):
        suptitle(sub, what[0].upper() + what[1:])
        _wrapped_panels(sub, panels, ncols, cmap, center, clip_option(options, None), max_size_option(options))
    return fig


@built
def fig_llms(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Figure 5: diagonal-normalised scores of the first layers of each model, one row per model,
    each panel's colour scale bounded by the 1% and 99% quantiles of its values (attention sink)."""
    table = require_table(tables, "scores", SCORE_NEEDS)
    models = list(options.get("models") or [])
    if not models:
        if "kind" not in table.columns:
            raise ValueError("scores table lacks column 'kind', needed to find the pretrained models")
        models = list(pd.unique(table.loc[table["kind"] == PRETRAINED_KIND, "model"]))
        if not models:
            raise ValueError("scores table has no model of kind 'pretrained' and options['models'] is empty")
    first = int(options.get("first_layers", 4))
    clip = clip_option(options, DEFAULT_CLIP)
    cmap, center = diagnorm_style(options)
    rows = [(m, _model_rows(table, "scores", m)) for m in models]
    panels = {m: _layer_panels(r, "score_diagnorm")[:first] for m, r in rows}
    ncols = max(len(p) for p in panels.values())
    fig = build_figure(PANEL_SIZE[0] * ncols, (PANEL_SIZE[1] + 0.3) * len(rows) + 0.7, HEATMAP_W_PAD)
    suptitle(fig, f"Pretrained models, first {ncols} layers: {DIAGNORM}\n{clip_text(clip)}".rstrip(), fontweight="bold")
    subfigs = np.atleast_1d(fig.subfigures(len(rows), 1)).ravel()
    for sub, (model, model_rows) in zip(subfigs, rows):
        suptitle(
            sub,
            f"{model_label(model, options)} (mean over {averaged_over(model_rows)} and every head)",
            fontweight="bold",
        )
        _wrapped_panels(sub, panels[model], ncols, cmap, center, clip, max_size_option(options))
    return fig


ALL_LAYERS_KINDS = {  # kind -> (value column, title, diagonal-normalised)
    "raw": ("score_mean", "attention scores", False),
    "diagnorm": ("score_diagnorm", DIAGNORM, True),
}
LAYERS_PER_PAGE = 8  # fig_all_layers: 2 rows of 4, so a page is wider than tall and fits a screen
PAGE_COLUMNS = 4


def all_layers_pages(tables: dict[str, pd.DataFrame], options: dict) -> list[tuple[str, list[int]]]:
    """The pages of fig_all_layers for options["model"]: (kind, 0-based layers) for each kind in
    ALL_LAYERS_KINDS and each run of at most options["layers_per_page"] layers, all pages of a kind
    the same size (30 layers in pages of 8, 8, 7, 7; 18 in 6, 6, 6)."""
    table = require_table(tables, "scores", SCORE_NEEDS)
    return layer_pages(sorted(_by_layer(_model_rows(table, "scores", options.get("model", NOPE)))), options)


def layer_pages(layers: list[int], options: dict) -> list[tuple[str, list[int]]]:
    """all_layers_pages for a model of these 0-based layers."""
    per_page = int(options.get("layers_per_page", LAYERS_PER_PAGE))
    if per_page < 1:
        raise ValueError(f"options['layers_per_page'] must be >= 1, got {per_page}")
    n_pages = math.ceil(len(layers) / per_page)
    sizes = [len(layers) // n_pages + (page < len(layers) % n_pages) for page in range(n_pages)]
    ends = np.cumsum(sizes)
    runs = [layers[end - size : end] for size, end in zip(sizes, ends)]
    return [(kind, run) for kind in ALL_LAYERS_KINDS for run in runs]


@built
def fig_all_layers(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """Figures 11-16, one page: options["layers"] (0-based; default every layer) of options["model"] (of
    options["n_layers"] layers in all, when the table holds the page's layers alone),
    options["kind"] "raw" (scores) or "diagnorm" (default; scores minus their diagonal's mean), in at most
    PAGE_COLUMNS columns (option max_columns), each panel bounded by the quantile_clip quantiles."""
    table = require_table(tables, "scores", SCORE_NEEDS)
    model = options.get("model", NOPE)
    kind = options.get("kind", "diagnorm")
    if kind not in ALL_LAYERS_KINDS:
        raise ValueError(f"options['kind'] must be one of {sorted(ALL_LAYERS_KINDS)}, got {kind!r}")
    value, what, diagonal_normalised = ALL_LAYERS_KINDS[kind]
    rows_of_model = _model_rows(table, "scores", model)
    by_layer = _by_layer(rows_of_model)
    layers = [int(k) for k in options.get("layers") or sorted(by_layer)]
    missing = sorted(set(layers) - set(by_layer))
    if missing:
        raise ValueError(f"model {model!r} has no layer {missing} (0-based) in the scores table")
    panels = [(maps(by_layer[k], value), f"Layer {k + 1}") for k in layers]
    rows = math.ceil(len(panels) / int(options.get("max_columns", PAGE_COLUMNS)))
    ncols = math.ceil(len(panels) / rows)
    fig = build_figure(PANEL_SIZE[0] * ncols, (PANEL_SIZE[1] + 0.3) * rows + 0.8, HEATMAP_W_PAD)
    clip = clip_option(options, DEFAULT_CLIP)
    span = f"layer {layers[0] + 1}" if len(layers) == 1 else f"layers {layers[0] + 1}-{layers[-1] + 1}"
    # two lines: a page of three columns is too narrow for one (the title would run off both edges)
    total = int(options.get("n_layers") or len(by_layer))  # a page drawn from its own layers' rows alone
    suptitle(
        fig,
        f"{model_label(model, options)}: {what}, {span} of {total}\n"
        f"{averaged_over(rows_of_model)}; {clip_text(clip)}".rstrip("; "),
        fontweight="bold",
    )
    cmap, center = diagnorm_style(options) if diagonal_normalised else (score_cmap(options), None)
    _wrapped_panels(fig, panels, ncols, cmap, center, clip, max_size_option(options))
    return fig


@built
def fig_nope_vs_rope(tables: dict[str, pd.DataFrame], options: dict) -> Figure:
    """NoPE against RoPE, one column per layer: the diagonal-normalised scores of each (one colour scale
    per layer, shared by the two) and their difference (first minus second, centred diverging map). Rows, not
    columns, are the three kinds so that the figure stays wide (MAX_ASPECT); the raw scores are in fig_all_layers."""
    table = require_table(tables, "scores", SCORE_NEEDS)
    first, second = list(options.get("compare") or TRAINED)
    a, b = (_by_layer(_model_rows(table, "scores", m)) for m in (first, second))
    layers = sorted(set(a) & set(b))
    if not layers:
        raise ValueError(f"models {first!r} and {second!r} share no layer")
    if a[layers[0]]["seq_len"].iloc[0] != b[layers[0]]["seq_len"].iloc[0]:
        raise ValueError(f"models {first!r} and {second!r} have different seq_len; cannot subtract")
    la, lb = model_label(first, options), model_label(second, options)
    cmap, center = diagnorm_style(options)
    clip, size = clip_option(options, None), max_size_option(options)
    height = (PANEL_SIZE[1] + 0.1) * 3 + 0.4
    fig = build_figure(max(PANEL_SIZE[0] * len(layers), height / MAX_ASPECT), height, HEATMAP_W_PAD)
    suptitle(
        fig, f"{la} vs {lb}: {DIAGNORM}; the {la} and {lb} panels of a layer share one colour scale", fontweight="bold"
    )
    rows = np.atleast_1d(fig.subfigures(3, 1)).ravel()
    for sub, label in zip(rows, (la, lb, f"{la} − {lb}")):
        suptitle(sub, f"{label}, diagonal-normalised")
    grid = [np.atleast_1d(sub.subplots(1, len(layers))).ravel() for sub in rows]
    for col, layer in enumerate(layers):
        norm_a, norm_b = maps(a[layer], "score_diagnorm"), maps(b[layer], "score_diagnorm")
        title = f"Layer {layer + 1}"
        shared = colour_limits(np.concatenate([norm_a.ravel(), norm_b.ravel()]), clip, center)
        heatmap(grid[0][col], norm_a, cmap, title, center=center, limits=shared, max_size=size)
        heatmap(grid[1][col], norm_b, cmap, title, center=center, limits=shared, max_size=size)
        heatmap(grid[2][col], norm_a - norm_b, difference_cmap(options), title, center=0.0, clip=clip, max_size=size)
    for row in grid:
        for col, ax in enumerate(row):
            name_axes_once(ax, col == 0, row is grid[-1])
    return fig
