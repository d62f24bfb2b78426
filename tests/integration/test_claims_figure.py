"""The claims ledger's figure, figL1_claims: one page per part of the paper, each wider than tall."""

import io

import pandas as pd
import pytest
from matplotlib.figure import Figure
from PIL import Image

from causalpos.catalogue.claims import (
    CLAIMS,
    LEDGER_CLAIMS,
    MAX_PAGE_CLAIMS,
    PAGE_CLAIMS,
    PAGES,
    TOPICS,
    claim_number,
    ledger_pages,
    page_of,
)
from causalpos.analysis.claims.ledger import build_ledger
from causalpos.figures.ledger import COLUMNS, PANEL, plot_ledger
from causalpos.catalogue.figures import claims_page, claims_pages
from causalpos.figures.style import MAX_ASPECT
from causalpos.catalogue.figures import claims_dir
from causalpos.workflow.job import Job, run_job
from helpers import R, small_inputs

PLOT = {"cmap": "viridis", "dpi": 40, "font_scale": 1.0, "formats": ["png"]}
ASPECT = MAX_ASPECT  # height / width: a report viewer (Chromium, 1280 x 800) cuts off the top of a taller image


@pytest.fixture(scope="module")
def ledger():
    return build_ledger(*small_inputs(), n_bootstrap=R)


def panel_claims(fig: Figure) -> list[str]:
    """The claim ids of a page's panels, from their titles ("1a: ...")."""
    return [ax.get_title(loc="left").split(":")[0] for ax in fig.axes if ax.axison]


def aspect(fig: Figure) -> float:
    width, height = fig.get_size_inches()
    return height / width


def test_every_claim_is_on_exactly_one_page():
    numbers = {claim_number(claim_id) for claim_id in CLAIMS}
    assert sorted(c for ids in PAGE_CLAIMS.values() for c in ids) == sorted(CLAIMS)  # each claim once
    assert set(TOPICS) == numbers and all(claim.id == claim_id for claim_id, claim in CLAIMS.items())
    for claim_id in CLAIMS:
        assert [page for page, ids in PAGE_CLAIMS.items() if claim_id in ids] == [page_of(claim_id)]
        assert claim_number(claim_id) in PAGES[page_of(claim_id)]
    assert all(0 < len(ids) <= MAX_PAGE_CLAIMS for ids in PAGE_CLAIMS.values())
    # claim 7's 14 claims on two pages named by their first and last claim; an id the catalogue lacks goes on
    # its topic's first page
    assert ledger_pages(7) == ["7a-7j", "7k-7n"] and page_of("7z") == "7a-7j"
    # claim 12 is target mask_controls's own ledger alone: not a page of a ledger of every claim
    assert ledger_pages() == [page for page in PAGES if page != "12"] and ledger_pages(8) == ["8-9"]
    assert ledger_pages(12) == ["12"] and [c for c in CLAIMS if c not in LEDGER_CLAIMS] == ["12a", "12b"]
    with pytest.raises(ValueError, match="no page"):
        ledger_pages(13)


def test_each_page_is_wider_than_tall_and_shows_its_claims_once(ledger):
    assert list(dict.fromkeys(ledger["claim_id"])) == list(LEDGER_CLAIMS)  # every claim of a ledger of all
    shown = []
    for page in ledger_pages():
        fig = plot_ledger(ledger, page, PLOT)
        claims = panel_claims(fig)
        assert claims and len(claims) <= MAX_PAGE_CLAIMS
        assert {page_of(claim_id) for claim_id in claims} == {page}
        assert aspect(fig) <= ASPECT, f"page {page}: {aspect(fig):.2f}"
        assert fig.get_size_inches()[0] == pytest.approx(COLUMNS * PANEL[0])  # every page the same width
        shown_ids = f"{claims[0]}-{claims[-1]}" if len(claims) > 1 else claims[0]  # page 11 has one claim, 11a
        assert f"claims {shown_ids}: " in fig.texts[0].get_text()  # the suptitle
        legend = fig.legends[0].get_title().get_text() if len(fig.legends) == 1 else ""
        assert "±1.64 standard errors, 95% one-sided bounds (unadjusted" in legend and "Holm" in legend
        shown += claims
    assert shown == list(LEDGER_CLAIMS)  # every claim on exactly one page, in order
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=40)
    width, height = Image.open(buffer).size
    assert height / width <= ASPECT


def test_the_largest_page_allowed_still_fits(ledger):
    """A page of MAX_PAGE_CLAIMS panels (claim 7's first) stays within the aspect, its legend listing failing
    rows without a tick label included: every 8a and 8d row made not supported, on a copy of claim 7's rows."""
    ids = PAGE_CLAIMS["7a-7j"]
    assert len(ids) == MAX_PAGE_CLAIMS
    fig = plot_ledger(ledger, "7a-7j", PLOT)
    assert panel_claims(fig) == list(ids) and aspect(fig) <= ASPECT
    failing = ledger[ledger["claim_id"].isin(["8a", "8d"])].assign(verdict="not supported")
    crowded = pd.concat(
        [ledger[ledger["claim_id"] == c] for c in ids[:8]] + [failing.assign(claim_id=c) for c in ids[8:]]
    )
    fig = plot_ledger(crowded, "7a-7j", PLOT)
    assert len(panel_claims(fig)) == MAX_PAGE_CLAIMS and aspect(fig) <= ASPECT


def test_a_ledger_of_one_claim_and_an_empty_page(ledger):
    """paper_llms's ledger (claim 8's rows): its page shows 8a-8d; a page without rows says so."""
    llms = ledger[ledger["claim"] == 8]
    fig = plot_ledger(llms, "8-9", PLOT)
    assert panel_claims(fig) == ["8a", "8b", "8c", "8d"] and aspect(fig) <= ASPECT
    assert "claims 8a-8d: pretrained RoPE LLMs (8)" in fig.texts[0].get_text()
    empty = plot_ledger(llms, "2-3", PLOT)
    assert panel_claims(empty) == [] and aspect(empty) <= ASPECT
    assert "claims 2-3: " in empty.texts[0].get_text()
    assert any("no rows of claims 2, 3" in text.get_text() for ax in empty.axes for text in ax.texts)
    no_data = build_ledger(None, None, None, None, None)
    assert sum((panel_claims(plot_ledger(no_data, page, {})) for page in ledger_pages()), []) == list(LEDGER_CLAIMS)
    with pytest.raises(ValueError, match="unknown page"):
        plot_ledger(ledger, "1-9", PLOT)


def test_run_claims_writes_the_pages_of_its_claims_and_drops_stale_ones(tmp_path):
    names = ("simulations", "theory", "scores", "intermediates", "groups")
    inputs = {}
    for name, frame in zip(names, small_inputs()):
        frame.to_parquet(tmp_path / f"{name}.parquet")
        inputs[name] = [tmp_path / f"{name}.parquet"]
    folder = tmp_path / "figures" / "figL1_claims"
    folder.mkdir(parents=True)
    (folder / "claims2-3.png").write_bytes(b"stale")
    (folder / "notes.txt").write_text("not a page")
    models = pd.read_parquet(tmp_path / "scores.parquet").query("kind == 'pretrained'")["model"].unique()
    labels = {m: f"Model {m.upper()}" for m in models}
    run_job(
        Job(
            "claims",
            input={name: [str(p) for p in paths] for name, paths in inputs.items()},
            output={
                "table": str(tmp_path / "claims.parquet"),
                "markdown": str(tmp_path / "claims.md"),
                "figures": str(folder),
            },
            params={
                "settings": {"n_bootstrap": 10, "seed": 0},
                "options": {**PLOT, "formats": ["png", "pdf"], "model_labels": labels},
                "claim": 8,
            },
        )
    )
    assert sorted(p.name for p in folder.iterdir()) == ["claims8-9.pdf", "claims8-9.png", "notes.txt"]
    markdown = (tmp_path / "claims.md").read_text()  # the per-layer table names the models as the config does
    assert all(f"| {label} | 1 |" in markdown for label in labels.values()) and models.size
    assert list(claims_pages(folder, ledger_pages(8), ["png", "pdf"])["8-9"]) == [
        str(folder / "claims8-9.png"),
        str(folder / "claims8-9.pdf"),
    ]


def test_the_pages_are_in_the_folder_rule_claims_writes():
    assert claims_page(claims_dir(), "2-3", "png") == "results/figures/figL1_claims/claims2-3.png"
    assert (
        claims_page(claims_dir("results/paper_llms"), "8-9", "png")
        == "results/paper_llms/figures/figL1_claims/claims8-9.png"
    )


def test_a_panel_labels_every_row_that_is_not_supported_first():
    """A panel of more rows than it can label (10a's 19 settings, 8a's layers) labels the rows a reader looks for,
    the ones that are not supported, and fills the rest evenly; a panel of few rows labels them all."""
    from causalpos.figures.ledger import MAX_LABELS, labelled_rows

    verdicts = ["supported"] * 19
    verdicts[5], verdicts[11] = "not supported", "inconclusive"
    shown = labelled_rows(verdicts)
    assert {5, 11} <= set(shown) and len(shown) <= MAX_LABELS and shown == sorted(shown)
    gap = -(-19 // MAX_LABELS)
    assert min(b - a for a, b in zip(shown, shown[1:])) >= gap  # never two labels so close they overlap
    assert labelled_rows(["supported"] * 4) == [0, 1, 2, 3]
    # the row not supported is labelled before the inconclusive ones that precede it
    assert 3 in labelled_rows(["inconclusive"] * 3 + ["not supported"] + ["inconclusive"] * 15)
    dense = labelled_rows(["inconclusive"] * 48)  # 48 layers, every one failing: spaced, not the first seven
    assert len(dense) == MAX_LABELS and min(b - a for a, b in zip(dense, dense[1:])) >= -(-48 // MAX_LABELS)


def test_failing_rows_without_a_tick_label_are_named_under_the_legend(ledger):
    """48 layers of 8a, all not supported: 7 get a tick label, the other 41 are named in the legend's title, each
    by its full label; a page where every failing row has its label names none."""
    from causalpos.figures.ledger import MAX_LABELS

    one = ledger[ledger["claim_id"] == "8a"].iloc[[0]]
    rows = pd.concat([one.assign(label=f"a long model name, L{k + 1}") for k in range(48)]).assign(
        verdict="not supported"
    )
    fig = plot_ledger(rows, "8-9", PLOT)
    title = fig.legends[0].get_title().get_text()
    named = title.split("not supported, no tick label: 8a: ")[1].replace("\n", " ").split(", a long")
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert len(ticks) == MAX_LABELS and len(named) == len(rows) - MAX_LABELS
    assert "no tick label" not in plot_ledger(ledger, "1", PLOT).legends[0].get_title().get_text()
