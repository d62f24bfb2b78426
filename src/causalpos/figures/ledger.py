"""The claims ledger as a figure, in pages: one panel per claim, each setting's value against the threshold."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from causalpos.catalogue.claims import PAGES, TOPICS, claim_number, page_of
from causalpos.analysis.claims.family import interval_z
from causalpos.analysis.claims.ledger import ledger_alpha
from causalpos.figures.style import model_label, new_figure


VERDICT_STYLE = {
    "supported": ("tab:green", "o"),
    "not supported": ("tab:red", "X"),
    "inconclusive": ("tab:gray", "s"),
    "by construction": ("tab:blue", "D"),
}
PANEL = (2.6, 3.0)  # inches per panel, whatever the number of claims: the grid wraps, the panels keep their size
COLUMNS = 5  # panels per row, and the width of every page (a page of fewer panels leaves the rest blank)
MARGIN = 1.0  # inches for the page's title and the legend
# The smallest text of a page, and the page's width: text of s points on a page W inches wide is
# s / 72 * legibility.REPORT_WIDTH_PX / W pixels high in the report (780 px wide: 8.3 px for "small", 10 pt in
# the notebook context, on 5 x 2.6 = 13 inches; "x-small", 8.3 pt, would need a page of 11 inches). Two rows
# (catalogue.MAX_PAGE_CLAIMS panels) then stay within style.MAX_ASPECT: (2 x 3.0 + 1.0) / 13 = 0.54, with room
# for the legend's list of failing rows that have no tick label; three rows (0.77) would not.
SMALLEST = "small"
TITLE_CHARS = 25  # characters per line of a panel's title (two lines): about the width of its axes at 10 pt
LABEL_CHARS = 16  # characters of a setting's (slanted) tick label
# slanted labels per panel: at 10 the lines of text of neighbouring labels touch in a 2.6-inch panel
MAX_LABELS = 7


def labelled_rows(verdicts: list[str]) -> list[int]:
    """Which of a panel's rows get a tick label, at most MAX_LABELS and no two closer than n / MAX_LABELS rows (nearer
    slanted labels run into each other): rows that are not supported first (a reader looks for what fails), then
    the inconclusive, then evenly spaced others, in row order."""
    n = len(verdicts)
    if n <= MAX_LABELS:
        return list(range(n))
    gap = math.ceil(n / MAX_LABELS)
    failing = [i for i, v in enumerate(verdicts) if v == "not supported"]
    unsettled = [i for i, v in enumerate(verdicts) if v not in ("supported", "not supported")]
    chosen: list[int] = []
    for i in failing + unsettled + list(range(0, n, gap)) + list(range(n)):
        if len(chosen) == MAX_LABELS:
            break
        if all(abs(i - j) >= gap for j in chosen):
            chosen.append(i)
    return sorted(chosen)


def display_label(label, model, options: dict | None) -> str:
    """A setting's tick label with its model's key (the ledger's identifier) shown as people write the model."""
    label = str(label)
    if isinstance(model, str) and label.startswith(model):
        return model_label(model, options) + label[len(model) :]
    return label


def page_rows(ledger: pd.DataFrame, page: str) -> pd.DataFrame:
    """The ledger's rows that page `page` (a key of catalogue.PAGES) shows."""
    if page not in PAGES:
        raise ValueError(f"unknown page {page!r} of the claims figure; known: {list(PAGES)}")
    return ledger[ledger["claim_id"].map(page_of) == page]


def page_title(claim_ids: list[str], page: str) -> str:
    """ "Claims ledger, claims 1a-3c: <their subjects>", from the claims the page shows (all of its claims'
    subjects when it shows none)."""
    shown = f"{claim_ids[0]}-{claim_ids[-1]}" if len(claim_ids) > 1 else "".join(claim_ids) or page
    numbers = list(dict.fromkeys(map(claim_number, claim_ids))) or list(PAGES[page])
    return f"Claims ledger, claims {shown}: " + ", ".join(f"{TOPICS[n].subject} ({n})" for n in numbers)


def plot_ledger(ledger: pd.DataFrame, page: str, options: dict | None = None):
    """One page of the claims figure: the claims of catalogue.PAGES[page] that the ledger has, one panel per
    claim: each setting's value with ±z standard errors against the claim's threshold (dashed line), colour
    and marker by verdict. z = interval_z(alpha) (1.645 at alpha = 0.05): each end of a bar is a one-sided
    95% bound, so a bar clear of the threshold is an unadjusted p below alpha; the verdict is Holm-adjusted
    over the ledger, so a bar can clear the threshold and the row still be inconclusive. Returns a matplotlib
    Figure built like the others (no pyplot); draw it through figures.style.save_figure, which applies the
    plot options (font_scale, dpi, formats), as figures.render does for the paper's figures.

    Panels have a fixed size (PANEL) and wrap COLUMNS to a row, and every page is COLUMNS panels wide, so
    a page of catalogue.MAX_PAGE_CLAIMS claims or fewer is wider than tall and all pages show their panels
    at one scale. Non-finite values (a ratio without an increase to compare with) are left out of a panel;
    a claim without any finite value says "no data"; a page whose claims the ledger lacks (paper_llms's
    ledger has claim 8 only) says so."""
    ledger = page_rows(ledger, page)
    alpha = ledger_alpha(ledger)
    z = interval_z(alpha)
    claim_ids = list(dict.fromkeys(ledger["claim_id"]))
    nrows = max(1, math.ceil(len(claim_ids) / COLUMNS))
    fig = new_figure(PANEL[0] * COLUMNS, PANEL[1] * nrows + MARGIN)
    axes = np.atleast_1d(fig.subplots(nrows, COLUMNS, squeeze=False)).ravel()
    if not claim_ids:
        claims = ", ".join(map(str, PAGES[page]))
        axes[0].text(
            0,
            0.5,
            f"This ledger has no rows of claims {claims}.",
            transform=axes[0].transAxes,
            ha="left",
            va="center",
            color="tab:gray",
        )
    unnamed = []  # per panel, the rows not supported that got no tick label (more of them than MAX_LABELS)
    for ax, claim_id in zip(axes, claim_ids):
        rows = ledger[ledger["claim_id"] == claim_id].reset_index(drop=True)
        rows["value"] = rows["value"].astype(float).where(np.isfinite(rows["value"].astype(float)))
        x = np.arange(len(rows))
        for verdict_name, (colour, marker) in VERDICT_STYLE.items():
            pick = (rows["verdict"] == verdict_name).to_numpy() & rows["value"].notna().to_numpy()
            if pick.any():
                err = (z * rows.loc[pick, "uncertainty"].astype(float)).fillna(0.0).to_numpy()
                ax.errorbar(
                    x[pick],
                    rows.loc[pick, "value"].astype(float),
                    yerr=err,
                    fmt=marker,
                    color=colour,
                    ms=5,
                    capsize=2,
                    lw=1,
                )
        for threshold in rows["threshold"].unique():
            ax.axhline(threshold, ls="--", color="black", lw=1)
        if not rows["value"].notna().any():
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="tab:gray")
        names = [
            display_label(label, model, options)
            for label, model in zip(rows["label"], rows.get("model", [None] * len(rows)))
        ]
        labels = [textwrap.shorten(name, LABEL_CHARS, placeholder="…") for name in names]
        shown = labelled_rows(rows["verdict"].tolist())
        unlabelled = [names[i] for i, v in enumerate(rows["verdict"]) if v == "not supported" and i not in shown]
        if unlabelled:
            unnamed.append(f"{claim_id}: {', '.join(unlabelled)}")
        turn = len(rows) > 3 or max(len(label) for label in labels) > 10
        ax.set_xticks(
            x[shown],
            [labels[i] for i in shown],
            rotation=50 if turn else 0,
            ha="right" if turn else "center",
            fontsize=SMALLEST,
        )
        ax.set_xlim(-0.6, len(rows) - 0.4)
        first = rows.iloc[0]
        title = first["title"] if "title" in rows.columns and isinstance(first["title"], str) else first["statement"]
        # a long title on two lines: one line would run past the panel (off the page in the last column)
        ax.set_title(
            textwrap.fill(textwrap.shorten(f"{claim_id}: {title}", 2 * TITLE_CHARS, placeholder="…"), TITLE_CHARS),
            fontsize=SMALLEST,
            loc="left",
        )
        ax.set_ylabel(
            textwrap.fill(f"{first['unit']} ({first['direction']} {first['threshold']:g})", 26), fontsize=SMALLEST
        )
        ax.tick_params(axis="y", labelsize=SMALLEST)
    for ax in axes[len(claim_ids) :]:
        ax.set_axis_off()
    handles = [Line2D([], [], color=c, marker=m, linestyle="none", label=v) for v, (c, m) in VERDICT_STYLE.items()]
    handles.append(Line2D([], [], color="black", ls="--", label="threshold"))
    bars = (
        f"error bars: ±{z:.3g} standard errors, {1 - alpha:.0%} one-sided bounds (unadjusted; "
        f"verdicts: Holm-adjusted, family-wise {alpha:g})"
    )
    # a failing row a reader cannot find by its tick label is named under the legend
    footnote = textwrap.wrap("not supported, no tick label: " + "; ".join(unnamed), 160) if unnamed else []
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=len(handles),
        fontsize=SMALLEST,
        title="\n".join([bars, *footnote]),
        title_fontsize=SMALLEST,
    )
    fig.suptitle(page_title(claim_ids, page), fontweight="bold")
    return fig
