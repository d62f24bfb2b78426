"""What every figure shares: panel size, model colours and labels, heatmaps, new figures, saving.

Heatmaps follow the paper: rows of the matrix are queries (top = position 0), columns are keys,
cells a query cannot see are left blank, and every panel has its own colour bar. Figures are
built without pyplot and saved through matplotlib's Agg (PNG) and PDF backends, so no global
backend or figure registry is touched.
"""

from __future__ import annotations

import functools
import math
import os
import textwrap
import uuid
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, NullFormatter

from causalpos.figures.legibility import (
    PNG_TEXT_KEY,
    REPORT_HEIGHT_PX,
    WIDEST_REPORT_WIDTH_PX,
    smallest_text_px,
)
from causalpos.catalogue.models import PRETRAINED_PALETTE, TRAINED_COLOURS, TRAINED_LABELS, label
from causalpos.catalogue.tables import require_columns

PANEL_SIZE = (3.2, 2.8)  # inches per heatmap panel, colour bar included
# The report's viewer cannot scroll: a figure shown WIDEST_REPORT_WIDTH_PX wide loses its top when taller than
# REPORT_HEIGHT_PX (696 / 959 = 0.726 in a 1280 x 720 window). Figures keep height / width under this (rounded
# down: 0.72).
MAX_ASPECT = math.floor(100 * REPORT_HEIGHT_PX / WIDEST_REPORT_WIDTH_PX) / 100
BUILD_DPI = 20  # see build_figure
IMAGE_ABOVE = 64  # heatmaps with more rows than this are drawn as one image (see heatmap)

# The paper's colour conventions (the authors' figure files): seaborn's rocket for every score map, raw and
# diagonal-normalised. A centred diverging map is ours, for differences (and diagonal-normalised scores with
# plot.centred_diagnorm). Defaults of plot.cmap / plot.diverging_cmap / plot.colour_limits in the config schema.
SCORE_CMAP = "rocket"
DIFFERENCE_CMAP = "coolwarm"
COLOUR_LIMITS = ("paper", "panel")  # plot.colour_limits: see fixed_limits

MODEL_COLOURS = TRAINED_COLOURS  # the trained models' (catalogue.models); the others' from PRETRAINED_PALETTE
MODEL_LABELS = TRAINED_LABELS


# ---------------------------------------------------------------- figures and tables


HEATMAP_W_PAD = 0.15  # inches; see new_figure


def new_figure(width: float, height: float, w_pad: float | None = None) -> Figure:
    """A Figure with constrained layout; w_pad (inches) pads each panel left and right. Grids of square
    heatmaps in subfigures need HEATMAP_W_PAD: with the default pad, constrained layout's passes do not settle
    and leave a line's first "Query position" label over the left edge."""
    # A bare Figure keeps matplotlib's no-op base canvas until savefig picks Agg (png) or the
    # PDF backend: seaborn's heatmap forces a full redraw of the figure after every panel, which
    # is free on the base canvas but quadratic in the number of panels on a real one.
    fig = Figure(figsize=(width, height), layout="constrained")
    if w_pad is not None:
        fig.get_layout_engine().set(w_pad=w_pad)
    return fig


def build_figure(width: float, height: float, w_pad: float | None = None) -> Figure:
    """new_figure at a low dpi while the panels are added.

    seaborn's heatmap measures its tick labels, and on the base canvas every measurement
    allocates a renderer the size of the whole figure: at 100 dpi that dominated the drawing
    time of large grids. Text and axes scale together with the dpi, so the measurement gives the
    same answer; `built` restores matplotlib's default dpi before the figure is returned.
    """
    fig = new_figure(width, height, w_pad)
    fig.set_dpi(BUILD_DPI)
    return fig


def built(function):
    @functools.wraps(function)
    def wrapper(tables, options):
        fig = function(tables, options)
        fig.set_dpi(matplotlib.rcParams["figure.dpi"])
        return fig

    return wrapper


BOLD_CHAR_EM = 0.66  # mean advance of a bold DejaVu Sans character, in em: how many fit a line


def suptitle(container, text: str, **kwargs) -> None:
    """container.suptitle (a Figure or SubFigure) with each line of `text` wrapped to the container's width, so
    that a title longer than a narrow page (two panels) wraps instead of running off both edges."""
    size = FontProperties(size=kwargs.get("fontsize", matplotlib.rcParams["figure.titlesize"])).get_size_in_points()
    width_in = container.bbox.width / container.figure.dpi
    chars = max(int(width_in * 72 / (BOLD_CHAR_EM * size)), 20)
    container.suptitle("\n".join(textwrap.fill(line, chars) for line in text.split("\n")), **kwargs)


def require_table(tables: dict, name: str, columns) -> pd.DataFrame:
    """tables[name], checked for `columns` (an empty table is allowed: the figure says what it lacks)."""
    return require_columns(tables.get(name), columns, name, allow_empty=True)


def model_label(model: str, options: dict | None = None) -> str:
    """A model's name as people write it: options["model_labels"] (the config's pretrained models), else
    a trained model's label, else its key (catalogue.models.label)."""
    return label(model, (options or {}).get("model_labels"))


def model_colours(models) -> dict:
    others = [m for m in models if m not in MODEL_COLOURS]
    palette = sns.color_palette(PRETRAINED_PALETTE, max(len(others), 1))
    return {m: MODEL_COLOURS.get(m) or palette[others.index(m)] for m in models}


def style_legend(ax, models, colours, styles: list[tuple[str, str]]) -> None:
    handles = [Line2D([], [], color=colours[m], lw=2, label=model_label(m)) for m in models]
    handles += [Line2D([], [], color="black", ls=ls, label=label) for ls, label in styles]
    ax.legend(handles=handles, fontsize="small")


def layer_axis(ax, xlabel: str = "Layer") -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)


def length_axis(ax, seq_lens) -> None:
    """A log2 x axis of sequence lengths with one tick per length (the length-generalisation figures)."""
    ax.set_xscale("log", base=2)
    ticks = sorted({int(t) for t in seq_lens})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("Sequence length (tokens)")


# ---------------------------------------------------------------- heatmaps


MAX_TICKS = 4  # tick labels per heatmap axis: "0 100 200", not "0 50 100150200250" in a small panel


def tick_step(n: int, max_ticks: int = MAX_TICKS) -> int:
    """A round step that puts at most max_ticks labels on an axis of n cells (0, step, 2 step, ...)."""
    steps = (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000)
    return next((s for s in steps if math.ceil(n / s) <= max_ticks), math.ceil(n / max_ticks))


def draw_heatmap(
    ax,
    matrix: np.ndarray,
    cmap: str,
    title: str | None = None,
    center: float | None = None,
    annot: bool = False,
    one_based: bool = False,
) -> None:
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
    labels = np.arange(1, n + 1) if one_based else tick_step(n)
    sns.heatmap(
        matrix,
        ax=ax,
        mask=~np.isfinite(matrix),
        cmap=cmap,
        square=True,
        cbar=True,
        xticklabels=labels,
        yticklabels=labels,
        **kwargs,
    )
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


def name_axes_once(ax, first_column: bool, last_row: bool) -> None:
    """A grid of heatmaps names the query axis in its first column and the key axis in its last row only."""
    if not first_column:
        ax.set_ylabel("")
    if not last_row:
        ax.set_xlabel("")


def binned(matrix: np.ndarray, max_size: int | None) -> tuple[np.ndarray, int]:
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


def clip_option(options: dict, default):
    clip = options.get("quantile_clip", default)
    if clip is None:
        return None
    low, high = (float(x) for x in clip)
    if not 0 <= low < high <= 1:
        raise ValueError(f"options['quantile_clip'] must be two quantiles 0 <= low < high <= 1, got {clip}")
    return low, high


def colour_limits(matrix: np.ndarray, clip, center: float | None):
    """Colour limits from the finite values: their full range or the clip quantiles; symmetric about center."""
    finite = matrix[np.isfinite(matrix)]
    if finite.size == 0:
        return None
    low, high = np.quantile(finite, clip) if clip else (finite.min(), finite.max())
    if center is not None:
        half = max(abs(low - center), abs(high - center)) or 1.0
        return center - half, center + half
    return (low, high) if high > low else None


def heatmap(
    ax,
    matrix: np.ndarray,
    cmap: str,
    title: str,
    center: float | None = None,
    clip=None,
    limits=None,
    max_size: int | None = 256,
) -> tuple[float, float] | None:
    """draw_heatmap, plus colour limits (clip quantiles or given) and block-averaging of big matrices.

    Limits are computed on the full matrix before any block-averaging; returns the limits used.
    """
    limits = limits or colour_limits(matrix, clip, center)
    shown, factor = binned(matrix, max_size)
    draw_heatmap(ax, shown, cmap, title, center=center)
    if shown.shape[0] > IMAGE_ABOVE:
        # Big matrices as one image sharing the mesh's colour map and norm (so the colour bar and
        # set_clim still apply): a rasterised mesh costs the PDF backend a full-figure raster per
        # panel, gigabytes for a 30-layer model, where an image is embedded as it is.
        mesh, n = ax.collections[0], shown.shape[0]
        ax.imshow(
            np.ma.masked_invalid(shown),
            cmap=mesh.get_cmap(),
            norm=mesh.norm,
            extent=(0, n, n, 0),
            interpolation="nearest",
            zorder=mesh.get_zorder(),
        )
        mesh.set_visible(False)
        ax.set_xlim(0, n)
        ax.set_ylim(n, 0)
    if limits is not None:
        ax.collections[0].set_clim(*limits)  # the colour bar follows its mappable
    if factor > 1:  # ticks name real positions: block k starts at position k * factor
        ax.set_xticklabels([str(int(t.get_text()) * factor) for t in ax.get_xticklabels()])
        ax.set_yticklabels([str(int(t.get_text()) * factor) for t in ax.get_yticklabels()], rotation=0)
    return limits


def score_cmap(options: dict) -> str:
    return options.get("cmap") or SCORE_CMAP


def difference_cmap(options: dict) -> str:
    return options.get("diverging_cmap") or DIFFERENCE_CMAP


def diagnorm_style(options: dict) -> tuple[str, float | None]:
    """Colour map and centre of diagonal-normalised scores: the paper's (score map, each panel's own range) or,
    with options["centred_diagnorm"], a diverging map on limits symmetric about 0."""
    if options.get("centred_diagnorm"):
        return difference_cmap(options), 0.0
    return score_cmap(options), None


def fixed_limits(options: dict) -> bool:
    """True (options["colour_limits"] "paper", the default): raw simulation scores on the paper's fixed range;
    "panel": every panel on its own range."""
    choice = options.get("colour_limits", "paper")
    if choice not in COLOUR_LIMITS:
        raise ValueError(f"options['colour_limits'] must be one of {list(COLOUR_LIMITS)}, got {choice!r}")
    return choice == "paper"


def max_size_option(options: dict):
    size = options.get("heatmap_max_size", 256)
    return int(size) if size else None


# ---------------------------------------------------------------- saving


def save_figure(draw, options: dict, outputs, label: str = "figure", title: str | None = None) -> None:
    """Call draw() -> Figure in the plot style of `options` and write it to every path in outputs; a PDF's Title
    is `title` (default: `label`), what a viewer's window and a reference manager show.

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
            # Two layout passes: constrained layout sizes the margins from the texts of the previous draw
            # (colour-bar ticks set after the panels, tick labels made only at a draw), and one pass leaves long
            # colour-bar ticks and the bottom axis labels over the edge. Then the layout is kept as it is: every
            # format is drawn from the same one, without a pass of its own (a pass costs about as much as the
            # drawing). The PNG's text sizes are also measured on the drawn figure.
            fig.draw_without_rendering()
            engine = fig.get_layout_engine()
            if engine is not None and not isinstance(engine, PlaceHolderLayoutEngine):
                engine.execute(fig)
                fig.set_layout_engine("none")  # a placeholder that keeps the layout (and colour bars) as they are
            for out in outputs:
                out.parent.mkdir(parents=True, exist_ok=True)
                tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex[:8]}.tmp")  # same folder: atomic rename
                temps.append(tmp)
                fmt, dpi = out.suffix.lstrip(".").lower(), options.get("dpi", 150)
                # the PNG says how small its text is, so a viewer's scale tells what a reader sees
                metadata = {PNG_TEXT_KEY: f"{smallest_text_px(fig, dpi):.2f}"} if fmt == "png" else None
                if fmt == "pdf":
                    metadata = {"Title": title or label}
                fig.savefig(tmp, format=fmt, dpi=dpi, metadata=metadata)
            for tmp, out in zip(temps, outputs):
                os.replace(tmp, out)
        finally:
            for tmp in temps:
                tmp.unlink(missing_ok=True)
