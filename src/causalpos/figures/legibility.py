"""What a reader can read in a figure: the size of its smallest text, and text that is clipped or overlaps.

REPORT_WIDTH_PX is the width at which the report shows a figure; MIN_TEXT_PX the smallest text height a reader
can read there. `smallest_text_px(fig, dpi)` is written into every PNG (PNG_TEXT_KEY) by style.save_figure, so
scripts/check-report.py can tell the text height a reader sees from the displayed width alone.

`clipped_texts`, `overlapping_texts` and `legends_over_data` lay the figure out on an Agg canvas (figures are
built on matplotlib's bare base canvas, see style.new_figure; the previous canvas is put back afterwards) and
compare what is drawn, in pixels at MEASURE_DPI.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.path import Path
from matplotlib.text import Text
from matplotlib.transforms import Bbox

# The report in a 1280 x 800 window (measured with scripts/check-report.py) shows a figure beside its table's list
# column: 780 px wide (all-layers pages) to 959 px (claims pages), 776 px high at most, and cannot scroll. The
# widths hold at 1280 x 720 too (they follow the window's width); the height is 80 px less there: 696 px, the
# limit figures keep to, so a 1280 x 720 window shows each whole. Text is checked at the narrowest width; the
# height limit (style.MAX_ASPECT) holds at the widest.
REPORT_WIDTH_PX = 780
REPORT_HEIGHT_PX = 696
WIDEST_REPORT_WIDTH_PX = 959
MIN_TEXT_PX = 8.0
PNG_TEXT_KEY = "Smallest text px"  # PNG tEXt key: the smallest font size, in pixels of the file
MEASURE_DPI = 100.0  # extents are compared at this dpi, so TOLERANCE_PX means the same for every figure
# Text extents are the font's full line box (ascent + descent), wider than the glyphs, and are rounded to
# whole pixels by the layout: two tick labels set edge to edge, or a label on the canvas's last pixel row,
# can cross by a fraction of a pixel without a reader seeing any contact. A pixel at 100 dpi (0.7 pt) is
# less than the gap between two characters of the smallest text, so a real collision is still found.
TOLERANCE_PX = 1.0


def drawn_tick_labels(axis) -> tuple[set[int], set[int]]:
    """(ids of the tick labels `axis` draws, ids of all its tick labels): matplotlib keeps tick objects left
    over from earlier draws and ticks outside the view limits, which it does not draw (as Axis._update_ticks)."""
    shown, every = set(), set()
    transform = axis.get_transform()
    low, high = sorted(transform.transform(np.asarray(axis.get_view_interval(), float)))
    slack = 1e-10 * max(abs(low), abs(high), 1.0)
    for locs, ticks in ((axis.get_majorticklocs(), axis.majorTicks), (axis.get_minorticklocs(), axis.minorTicks)):
        for n, tick in enumerate(ticks):
            labels = {id(tick.label1), id(tick.label2)}
            every |= labels
            if n < len(locs) and low - slack <= transform.transform(np.asarray([locs[n]], float))[0] <= high + slack:
                shown |= labels
    return shown, every


def visible_texts(fig: Figure) -> list[Text]:
    """Every visible, non-empty text artist of the figure (titles, labels, tick labels, legends, annotations),
    each once; tick labels only of the ticks matplotlib draws."""
    hidden = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            shown, every = drawn_tick_labels(axis)
            hidden |= every - shown
    found, seen = [], set()
    for text in fig.findobj(Text):
        if id(text) in seen or id(text) in hidden or not text.get_text().strip() or not text.get_visible():
            continue
        seen.add(id(text))
        if text.axes is None or text.axes.get_visible():  # a hidden axes hides its texts
            found.append(text)
    return found


def smallest_font_points(fig: Figure) -> float:
    """The smallest font size of any visible text, in points (inf without text)."""
    return min((text.get_fontsize() for text in visible_texts(fig)), default=float("inf"))


def smallest_text_px(fig: Figure, dpi: float) -> float:
    """The smallest font size of any visible text, in pixels of the figure saved at `dpi`."""
    return smallest_font_points(fig) * dpi / 72.0


def displayed_text_px(fig: Figure, width_px: float = REPORT_WIDTH_PX) -> float:
    """The smallest text's height in pixels when the whole figure is shown `width_px` wide."""
    return smallest_font_points(fig) / 72.0 * width_px / fig.get_figwidth()


# ---------------------------------------------------------------- measured on a drawn figure


@contextmanager
def drawn(fig: Figure, renderer=None):
    """The figure laid out on an Agg canvas at MEASURE_DPI, as for drawing it (every text placed, tick labels
    made) but without painting pixels; yields the canvas's renderer. Its previous canvas and dpi are put back
    afterwards. Given the renderer of an enclosing drawn(fig), yields it as it is: several measurements of one
    layout (a layout costs more than all of them)."""
    if renderer is not None:
        yield renderer
        return
    previous, dpi = fig.canvas, fig.dpi
    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(MEASURE_DPI)
    try:
        # on the canvas just attached (its renderer is the one measured with), twice: as style.save_figure
        # does, since constrained layout sizes its margins from the previous draw's texts
        fig.draw_without_rendering()
        fig.draw_without_rendering()
        yield canvas.get_renderer()
    finally:
        fig.set_dpi(dpi)
        fig.set_canvas(previous)


def text_corners(text: Text, renderer) -> np.ndarray:
    """The four corners (in order around it) of the box a text is drawn in, in display pixels. A rotated
    text's window extent is the upright box around its slanted box, far wider than the text; the slanted box
    has the upright text's size, turned about the same centre."""
    box = text.get_window_extent(renderer)
    angle = text.get_rotation()
    if angle % 90 == 0:
        return np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])
    text.set_rotation(0)
    try:
        flat = text.get_window_extent(renderer)
    finally:
        text.set_rotation(angle)
    half = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * [flat.width / 2, flat.height / 2]
    turn = np.radians(angle)
    rotation = np.array([[np.cos(turn), -np.sin(turn)], [np.sin(turn), np.cos(turn)]])
    return half @ rotation.T + [(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2]


def overlap_depth(a: np.ndarray, b: np.ndarray) -> float:
    """How far two rectangles (4 x 2 corners in order) overlap, in pixels: the least overlap of their shadows
    on the directions of their edges (separating axes); <= 0 where they are apart or only touch."""
    depth = np.inf
    for quad in (a, b):
        for edge in (quad[1] - quad[0], quad[2] - quad[1]):
            length = np.hypot(*edge)
            if length == 0:
                continue
            normal = np.array([-edge[1], edge[0]]) / length
            pa, pb = a @ normal, b @ normal
            depth = min(depth, min(pa.max(), pb.max()) - max(pa.min(), pb.min()))
    return float(depth)


def clipped_texts(fig: Figure, renderer=None) -> list[Text]:
    """Visible texts that lie partly outside the figure's canvas (by more than TOLERANCE_PX); `renderer`: as
    in drawn()."""
    with drawn(fig, renderer) as renderer:
        width, height = fig.bbox.width, fig.bbox.height
        clipped = []
        for text in visible_texts(fig):
            corners = text_corners(text, renderer)
            if (corners.min(axis=0) < -TOLERANCE_PX).any() or (
                corners.max(axis=0) > np.array([width, height]) + TOLERANCE_PX
            ).any():
                clipped.append(text)
    return clipped


def overlapping_texts(fig: Figure, renderer=None) -> list[tuple[Text, Text]]:
    """Pairs of visible texts whose boxes overlap by more than TOLERANCE_PX (any two texts of the figure:
    a title and a neighbouring panel's tick labels, a colour bar's ticks and the next panel's axis label);
    `renderer`: as in drawn()."""
    with drawn(fig, renderer) as renderer:
        texts = visible_texts(fig)
        corners = [text_corners(text, renderer) for text in texts]
    if len(texts) < 2:
        return []
    # upright boxes first (numpy, every pair at once); the slanted boxes only for the pairs these leave
    low = np.array([c.min(axis=0) for c in corners])
    high = np.array([c.max(axis=0) for c in corners])
    crossing = np.minimum(high[:, None], high[None]) - np.maximum(low[:, None], low[None])
    candidates = np.argwhere(np.triu((crossing > TOLERANCE_PX).all(axis=2), k=1))
    return [(texts[i], texts[j]) for i, j in candidates if overlap_depth(corners[i], corners[j]) > TOLERANCE_PX]


def texts_over_axes(fig: Figure, renderer=None) -> list[tuple[Text, object]]:
    """(text, axes) pairs where a visible text lies over the drawing area of an axes it does not belong to, by more
    than TOLERANCE_PX: a panel's title under a colour bar, a colour bar's label across the next panel (texts are
    checked against every artist that covers an area, not only against other texts); `renderer`: as in drawn()."""
    found = []
    with drawn(fig, renderer) as renderer:
        areas = [(ax, ax.get_window_extent(renderer)) for ax in fig.axes if ax.get_visible() and ax.axison]
        for text in visible_texts(fig):
            corners = text_corners(text, renderer)
            own = text.axes.get_window_extent(renderer).bounds if text.axes is not None else None
            for ax, box in areas:
                if text.axes is ax or box.bounds == own:  # its own axes, or a twin drawn over the same area
                    continue
                area = np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])
                if overlap_depth(corners, area) > TOLERANCE_PX:
                    found.append((text, ax))
    return found


def data_paths(ax) -> list[np.ndarray]:
    """What an axes plots, in display pixels: the vertices of each run of finite points of its data lines
    (Line2D in data coordinates: lines, markers, error-bar caps), the segments of its error bars
    (LineCollection) and the offsets of its scatter points (one point each). Lines in axes coordinates
    (axhline, axvline: references, not data) and shaded bands are left out."""
    found = []
    for line in ax.get_lines():
        if line.get_visible() and line.get_transform().contains_branch(ax.transData):
            found += finite_runs(line.get_transform().transform(np.asarray(line.get_xydata(), float)))
    for collection in ax.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, LineCollection) and collection.get_transform().contains_branch(ax.transData):
            found += [
                run
                for segment in collection.get_segments()
                for run in finite_runs(collection.get_transform().transform(np.asarray(segment, float)))
            ]
        elif isinstance(collection, PathCollection):
            offsets = collection.get_offset_transform().transform(np.asarray(collection.get_offsets(), float))
            found += [point[None] for point in offsets if np.isfinite(point).all()]
    return found


def finite_runs(points: np.ndarray) -> list[np.ndarray]:
    """The runs of consecutive finite points (a NaN breaks a line)."""
    finite = np.isfinite(points).all(axis=1)
    breaks = np.flatnonzero(np.diff(finite.astype(int))) + 1
    return [run for run, ok in zip(np.split(points, breaks), np.split(finite, breaks)) if ok.all() and len(run)]


def legends_over_data(fig: Figure, renderer=None) -> list[tuple]:
    """(legend, axes) for every legend (of an axes or of the figure) that covers a data point, a line between
    two, or an error bar of any axes (data_paths), by more than TOLERANCE_PX; `renderer`: as in drawn()."""
    found = []
    with drawn(fig, renderer) as renderer:
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
        for legend in legends:
            if not legend.get_visible():
                continue
            box = legend.get_window_extent(renderer).padded(-TOLERANCE_PX)
            inner = Bbox.from_extents(box.x0, box.y0, max(box.x0, box.x1), max(box.y0, box.y1))
            for ax in fig.axes:
                if any(covers(inner, run) for run in data_paths(ax)):
                    found.append((legend, ax))
    return found


def covers(box: Bbox, run: np.ndarray) -> bool:
    """Whether a box holds one of the points or crosses one of the segments of a run of points."""
    if box.count_contains(run) > 0:
        return True
    return len(run) > 1 and Path(run).intersects_bbox(box, filled=False)
