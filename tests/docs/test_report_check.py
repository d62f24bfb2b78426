"""scripts/check-report.py without a browser: the text size a reader sees, read from the PNG itself, and the
checks of a table's order and of what it opens first."""

from __future__ import annotations

import base64
import importlib.util
import sys

import pytest
from helpers import ROOT

from causalpos.figures.legibility import MIN_TEXT_PX, PNG_TEXT_KEY
from causalpos.figures.style import new_figure, save_figure


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("check_report", ROOT / "scripts" / "check-report.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def draw(fontsize: float):
    def figure():
        fig = new_figure(4.0, 2.0)
        ax = fig.add_subplot()
        ax.set_title("title", fontsize=fontsize + 4)
        ax.set_xlabel("smallest", fontsize=fontsize)
        ax.tick_params(labelsize=fontsize + 2)
        return fig

    return figure


def test_the_text_a_reader_sees_is_read_from_the_png(check, tmp_path):
    """save_figure's PNG records its smallest text (9 pt at 150 dpi: 18.75 px); shown at a third of its
    width, that is 6.25 px, under MIN_TEXT_PX; at its natural width it passes. The value comes from the PNG's
    bytes, as decoded from the report's data: URL."""
    png = tmp_path / "figure.png"
    save_figure(draw(9.0), {"dpi": 150}, [png])
    data = check.data_uri_bytes("data:image/png;base64," + base64.b64encode(png.read_bytes()).decode())
    file_px = check.png_text_px(data)
    assert file_px == pytest.approx(9.0 * 150 / 72, abs=0.01)
    natural = 4.0 * 150
    shown = check.displayed_text_px(file_px, natural / 3, natural)
    assert shown == pytest.approx(6.25, abs=0.01) and check.text_verdict(shown) == "FAIL"
    assert check.text_verdict(check.displayed_text_px(file_px, natural, natural)) == "ok"
    assert check.text_verdict(MIN_TEXT_PX) == "ok"


def test_a_png_without_the_entry_is_unknown(check, tmp_path):
    """A PNG from before the entry existed (or any other PNG) neither passes nor fails."""
    png = tmp_path / "old.png"
    fig = draw(9.0)()
    fig.savefig(png, format="png", dpi=50)
    file_px = check.png_text_px(png.read_bytes())
    assert file_px is None and PNG_TEXT_KEY not in png.read_bytes().decode("latin-1")
    assert check.text_verdict(check.displayed_text_px(file_px, 100, 200)) == "unknown"
    assert check.png_text_px(b"not a png") is None


def pages(model: str, order: str) -> list[str]:
    return [f"results/figures/fig_all_layers_{model}/{page}.png" for page in order.split()]


def test_all_layers_order(check):
    """The order the report showed before (1-6, 13-18, 7-12; 1-8, 17-23, 24-30, 9-16), a model's pages apart,
    and diagonal-normalised first are found; raw then diagonal-normalised, each by layer, is not."""
    good = pages(
        "gemma3_270m",
        "raw_layers01-06 raw_layers07-12 raw_layers13-18 diagnorm_layers01-06 "
        "diagnorm_layers07-12 diagnorm_layers13-18",
    ) + pages("smollm2_135m", "raw_layers01-08 raw_layers09-16 raw_layers17-23 raw_layers24-30")
    assert check.all_layers_order_problems(good) == []
    assert check.all_layers_order_problems(good + ["results/figures/fig02_l2norm.png"]) == []
    old = pages("gemma3_270m", "raw_layers01-06 raw_layers13-18 raw_layers07-12")
    (problem,) = check.all_layers_order_problems(old)
    assert "raw 1-6, raw 13-18, raw 7-12" in problem and "expected raw 1-6, raw 7-12, raw 13-18" in problem
    assert check.all_layers_order_problems(
        pages("smollm2_135m", "raw_layers01-08 raw_layers17-23 raw_layers24-30 raw_layers09-16")
    )
    assert check.all_layers_order_problems(pages("nope", "diagnorm_layers01-04 raw_layers01-04"))
    apart = pages("nope", "raw_layers01-04") + pages("rope", "raw_layers01-04") + pages("nope", "diagnorm_layers01-04")
    assert any("not listed together" in p for p in check.all_layers_order_problems(apart))


def table(toggles, state, rows):
    return {"category": "Figures", "subcategory": "Simulation", "toggles": toggles, "state": state, "rows": rows}


def test_png_first(check):
    """A row opens its PNG while the toggle is as it starts; a table of PDFs and PNGs without a toggle lists
    each format apart, and fails too."""
    mimes = {
        "a.png": "image/png",
        "a.pdf": "application/pdf",
        "b.png": "image/png",
        "b.pdf": "application/pdf",
        "runtimes.html": "text/html",
    }
    toggle = [["format", ["png", "vector pdf"]]]
    rows = [
        {"labels": [name], "variants": [["png", f"{name}.png"], ["vector pdf", f"{name}.pdf"]], "opens": f"{name}.png"}
        for name in "ab"
    ]
    assert check.png_first_problems(table(toggle, ["png"], rows), mimes) == []
    pdf_first = [{**row, "opens": row["opens"].replace(".png", ".pdf")} for row in rows]
    assert len(check.png_first_problems(table(toggle, ["vector pdf"], pdf_first), mimes)) == 2
    apart = [{"labels": [path], "variants": [["", path]], "opens": path} for path in ("a.pdf", "a.png")]
    assert any("no PDF/PNG toggle" in p for p in check.png_first_problems(table([], [], apart), mimes))
    html = [{"labels": ["runtimes.html"], "variants": [["", "runtimes.html"]], "opens": "runtimes.html"}]
    assert check.png_first_problems(table([], [], html), mimes) == []
