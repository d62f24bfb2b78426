"""The figures' records: what each reads exists, how each is drawn resolves, and figure M1 draws rule summary's
table with the numbers it used to compute from the scores itself."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest

from causalpos.catalogue.figures import (
    CONFIGURABLE,
    FIGURE_CAPTIONS,
    FIGURES,
    MODEL_SETS,
    RENDERED,
    FigureSpec,
    figure_spec,
)
from causalpos.catalogue.tables import TABLES
from unit_tables import two_models


@pytest.mark.parametrize("figure_id", FIGURES)
def test_a_figure_reads_known_tables_and_is_drawn_by_a_function(figure_id):
    from causalpos.figures.render import drawer

    spec = FIGURES[figure_id]
    assert spec.id == figure_id and spec.tables and set(spec.tables) <= set(TABLES)
    assert spec.models is None or spec.models in MODEL_SETS
    draw = drawer(figure_id)
    assert callable(draw) and f"{draw.__module__}.{draw.__name__}" == spec.draw
    if not spec.beside:  # figures.render calls it with (tables, options)
        assert list(inspect.signature(draw).parameters)[:2] == ["tables", "options"]
    else:
        assert len(spec.tables) == 1 and figure_id not in RENDERED


@pytest.mark.parametrize("figure_id", FIGURES)
def test_every_figure_has_its_caption_and_its_caption_file(figure_id):
    spec = FIGURES[figure_id]
    assert len(spec.caption.split()) > 20  # what the figure shows, in sentences
    assert (spec.caption_file == FIGURE_CAPTIONS) == (figure_id in CONFIGURABLE)
    assert spec.caption_file.startswith("report/") and spec.caption_file.endswith(".rst")


def test_own_caption_files_are_one_per_figure():
    files = [spec.caption_file for spec in FIGURES.values() if spec.caption_file != FIGURE_CAPTIONS]
    assert len(files) == len(set(files)) == len(FIGURES) - len(CONFIGURABLE)


def test_an_unknown_figure_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown figure 'fig99'.*fig01_mechanism"):
        figure_spec("fig99")
    with pytest.raises(ValueError, match="drawn by the rule that writes its table 'claims'"):
        from causalpos.figures.render import render_figure

        render_figure("figL1_claims", {}, {}, [])


def test_uses_variants_follows_the_simulation_table():
    assert FigureSpec("x", "s", ("simulation", "theory")).uses_variants
    assert not FigureSpec("x", "s", ("theory",)).uses_variants


@pytest.fixture(scope="module")
def summaries(tmp_path_factory):
    """Rule summary's tables of two models, as that rule writes them (a layer at a time from Parquet), and the
    scores and probe they come from."""
    from causalpos.analysis.summary import write_summaries
    from causalpos.io import PartTable, read_table

    tables = two_models()
    folder = tmp_path_factory.mktemp("summary")
    tables["scores"].to_parquet(folder / "scores.parquet")
    written = write_summaries(PartTable([folder / "scores.parquet"], "scores"), tables["probe"], folder)
    return tables, {name: read_table(path) for name, path in written.items()}


def lines_by_panel(fig) -> list[list[np.ndarray]]:
    return [[np.asarray(line.get_ydata(), dtype=float) for line in ax.get_lines()] for ax in fig.axes]


def test_m1_draws_the_summary_table_with_the_numbers_it_computed_before(summaries):
    """Before, figM1 computed analysis.summary.nonrelativeness from the scores (models in the order of its rows);
    now it reads the table rule summary wrote: every line is the same."""
    from causalpos.analysis.summary import nonrelativeness
    from causalpos.figures.measurements import fig_nonrelativeness

    tables, written = summaries
    old = nonrelativeness(tables["scores"])
    fig = fig_nonrelativeness({"nonrelativeness": written["nonrelativeness"]}, {})
    expected = []
    for panel in (
        ["index", "index_no_sink", "index_noise"],
        ["deficit", "deficit_no_sink"],
        ["score_std", "pattern_std"],
    ):
        expected.append(
            [
                old[old["model"] == m].sort_values("layer")[c].to_numpy(float)
                for m in pd.unique(old["model"])
                for c in panel
            ]
        )
    drawn = lines_by_panel(fig)
    drawn = [[y for y in panel if len(y) > 2 or not np.allclose(y, 0.0)] for panel in drawn]  # less the zero lines
    assert len(drawn) == 3
    for got, want in zip(drawn, expected):
        assert len(got) == len(want) and len(want) > 0
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_m2_and_m3_draw_the_summary_tables_as_computed_before(summaries):
    from causalpos.analysis.summary import increasing_fraction, probe_summary
    from causalpos.figures.measurements import fig_increasing_fraction, fig_position_probe

    tables, written = summaries
    old = increasing_fraction(tables["scores"])
    fig = fig_increasing_fraction({"increasing_fraction": written["increasing_fraction"]}, {})
    got = [np.asarray(c.lines[0].get_ydata(), dtype=float) for c in fig.axes[0].containers]
    want = [
        old[old["model"] == m].sort_values("layer")[c].to_numpy(float)
        for m in pd.unique(old["model"])
        for c in ("fraction", "fraction_no_sink")
    ]
    assert len(got) == len(want) == 4
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    old = probe_summary(tables["probe"])
    fig = fig_position_probe({"position_probe": written["position_probe"]}, {})
    ratio = [np.asarray(line.get_ydata(), dtype=float) for line in fig.axes[1].get_lines() if len(line.get_xdata()) > 2]
    want = [old[old["model"] == m].sort_values("layer")["ratio"].to_numpy(float) for m in pd.unique(old["model"])]
    assert len(ratio) == len(want) == 2
    for a, b in zip(ratio, want):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
