"""Claim 9a: do the verdicts depend on the input law? Every claim measured on a paper-law variant that has an
official-law twin, measured again with the twin in its place.

The simulation tables' `sampler` column says how a variant's inputs were drawn: "full" and "reduced" are two
exact samplers of the paper's law (unit norm, E<x_i, x_j> = alpha), "official" the authors' notebooks'
x_i = normalize(g_i + l u), l = sqrt(alpha / (1 - alpha)) (Section 4.1: "a shared Gaussian component with an
independent Gaussian noise component"), which meets E<x_i, x_j> = alpha only approximately. A twin has the
same parameters but the law (replicates.find_twins).
"""

from __future__ import annotations

import re

from causalpos.analysis.claims.replicates import LedgerInputs
from causalpos.analysis.claims.rows import absent_row, row

LAW_IN_SETTING = re.compile(r", official( law)?")


def agreement(paper: str, official: str) -> float:
    """1 = the same verdict, 0.5 = exactly one of them inconclusive, 0 = supported against not supported."""
    if paper == official:
        return 1.0
    return 0.5 if "inconclusive" in (paper, official) else 0.0


def names_in(note: str, names) -> list[str]:
    """The variant names a row's note mentions (every simulation claim names the variants it reads)."""
    return [n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w.])", str(note))]


def claim9(rows: list[dict], twin_rows: list[dict], data: LedgerInputs, th: dict) -> list[dict]:
    """9a: one row per claim and setting measured on a variant that has an official-law twin, measured again
    with the twin in its place (the twin-view row whose note names a twin: every simulation claim's note names
    the variants it reads).

    The ledger's claims are built twice: on the paper-law variants (the ledger's own rows), then on the same
    settings with each twinned variant swapped for its twin (LedgerInputs.twin_view; the other variants of a
    comparison, e.g. the alpha = 0 partner of 3b or the LayerNorm side of 5a, stay as they are: at alpha = 0
    the two laws coincide, i.i.d. uniform on the sphere). Rows are matched by claim and setting (the law
    taken out of the setting). Value: the agreement of the two verdicts (1 the same, 0.5 one inconclusive,
    0 opposite); > 0.5 = the verdict does not depend on the law. Both values and verdicts are in the extra
    columns (paper_*, official_*) and the note. The expected answer is that no verdict changes.
    """
    if not data.twins:
        return [absent_row("9a", th, "no paper-law variant has an official-law twin (same parameters, sampler "
                                     "'official') in the simulation tables")]
    main = {(r["claim_id"], LAW_IN_SETTING.sub("", r["setting"])): r for r in rows}
    out = []
    for twin in twin_rows:
        key = (twin["claim_id"], LAW_IN_SETTING.sub("", twin["setting"]))
        paper = main.get(key)
        used = names_in(twin["note"], sorted(set(data.twins.values())))
        if paper is None or not used:
            continue
        swapped = ", ".join(used)
        value = agreement(paper["verdict"], twin["verdict"])
        note = (f"paper law: {paper['value']:.4g} ± {paper['uncertainty']:.2g}, {paper['verdict']}; official law "
                f"({swapped}): {twin['value']:.4g} ± {twin['uncertainty']:.2g}, {twin['verdict']}; "
                + ("the same verdict" if value == 1.0 else "the verdict changes"))
        out.append(row("9a", f"{paper['claim_id']}: {paper['setting']}", (value, 0.0), th, note=note,
                       layer=None if paper["layer"] != paper["layer"] else paper["layer"],
                       label=f"{paper['claim_id']} {paper['label']}", model=paper.get("model"),
                       compared_claim=paper["claim_id"], paper_value=paper["value"],
                       paper_uncertainty=paper["uncertainty"], paper_verdict=paper["verdict"],
                       official_value=twin["value"], official_uncertainty=twin["uncertainty"],
                       official_verdict=twin["verdict"]))
    if not out:
        out.append(absent_row("9a", th, f"official-law twins ({', '.join(sorted(data.twins.values()))}) enter no "
                                        "claim's numbers"))
    return out
