"""What a reader can read in a figure: the size of its smallest text, and text that is clipped or overlaps.

REPORT_WIDTH_PX is the width at which the report shows a figure; MIN_TEXT_PX the smallest text height a reader
can read there. `smallest_text_px(fig, dpi)` is written into every PNG (PNG_TEXT_KEY) by style.save_figure, so
scripts/check-report.py can tell the text height a reader sees from the displayed width alone.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.text import Text

REPORT_WIDTH_PX = 1029  # the report's viewer in a 1280 x 800 window (measured with scripts/check-report.py)
MIN_TEXT_PX = 8.0
PNG_TEXT_KEY = "Smallest text px"  # PNG tEXt key: the smallest font size, in pixels of the file


def visible_texts(fig: Figure) -> list[Text]:
    """Every visible, non-empty text artist of the figure (titles, labels, tick labels, legends, annotations)."""
    found = []
    for text in fig.findobj(Text):
        if not text.get_text().strip() or not text.get_visible():
            continue
        parent, shown = text, True
        while parent is not None:  # a hidden axes or subfigure hides its texts
            if not parent.get_visible():
                shown = False
                break
            parent = getattr(parent, "axes", None) if parent is not getattr(parent, "axes", None) else None
        if shown and (text.axes is None or text.axes.get_visible()):
            found.append(text)
    return found


def smallest_text_px(fig: Figure, dpi: float) -> float:
    """The smallest font size of any visible text, in pixels of the figure saved at `dpi`."""
    sizes = [text.get_fontsize() for text in visible_texts(fig)]
    return min(sizes) * dpi / 72.0 if sizes else float("inf")


def displayed_text_px(fig: Figure, width_px: float = REPORT_WIDTH_PX) -> float:
    """The smallest text's height in pixels when the whole figure is shown `width_px` wide."""
    points = min((text.get_fontsize() for text in visible_texts(fig)), default=float("inf"))
    return points / 72.0 * width_px / fig.get_figwidth()
