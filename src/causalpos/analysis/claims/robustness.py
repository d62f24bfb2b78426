"""Claim 9a: do the verdicts depend on the input law? Every claim measured on a variant of the paper's
construction that has an exact-law twin, measured again with the twin in its place.

The simulation tables' `sampler` column says how a variant's inputs were drawn: "official" is the paper's
construction (Section 4.1: "a shared Gaussian component with an independent Gaussian noise component", as in
the authors' notebooks), x_i = normalize(g_i + l u), l = sqrt(alpha / (1 - alpha)), which meets
E<x_i, x_j> = alpha only approximately; "exact_full" and "exact_reduced" are two samplers of our exact-moment
law (unit norm, E<x_i, x_j> = alpha exactly: Section 3.2's assumption taken literally), the robustness check.
A twin has the same parameters but the law (replicates.find_twins).
"""

from __future__ import annotations

import math
import re

from causalpos.catalogue.claims import CLAIMS, verdict
from causalpos.analysis.claims.family import one_sided
from causalpos.analysis.claims.replicates import LedgerInputs
from causalpos.analysis.claims.rows import absent_row, row

LAW_IN_SETTING = re.compile(r", exact( law)?")


def agreement(official: str, exact: str) -> float:
    """1 = the same verdict, 0.5 = exactly one of them inconclusive, 0 = supported against not supported."""
    if official == exact:
        return 1.0
    return 0.5 if "inconclusive" in (official, exact) else 0.0


def names_in(note: str, names) -> list[str]:
    """The variant names a row's note mentions (every simulation claim names the variants it reads)."""
    return [n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w.])", str(note))]


def claim9(rows: list[dict], twin_rows: list[dict], data: LedgerInputs, th: dict) -> list[dict]:
    """9a: one row per claim and setting measured on a variant that has an exact-law twin, measured again
    with the twin in its place (the twin-view row whose note names a twin: every simulation claim's note names
    the variants it reads).

    The ledger's claims are built twice: on the official-law variants (the ledger's own rows), then on the same
    settings with each twinned variant swapped for its twin (LedgerInputs.twin_view; the other variants of a
    comparison, e.g. the alpha = 0 partner of 3b or the LayerNorm side of 5a, stay as they are: at alpha = 0
    the two laws coincide, i.i.d. uniform on the sphere). Rows are matched by claim and setting (the law
    taken out of the setting). Value: the agreement of the two verdicts (1 the same, 0.5 one inconclusive,
    0 opposite); > 0.5 = the verdict does not depend on the law. Both values and verdicts are in the extra
    columns (official_*, exact_*) and the note, and the size of the change, exact minus official, with its standard
    error (law_change, law_change_uncertainty): a verdict can hold while the value moves. The expected answer is
    that no verdict changes.
    """
    if not data.twins:
        return [
            absent_row(
                "9a",
                th,
                "no official-law variant has an exact-law twin (same parameters, sampler "
                "'exact') in the simulation tables",
            )
        ]
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
        note = (
            f"official law (the paper's): {paper['value']:.4g} ± {paper['uncertainty']:.2g}, {paper['verdict']}; "
            f"exact law ({swapped}): {twin['value']:.4g} ± {twin['uncertainty']:.2g}, {twin['verdict']}; "
            + ("the same verdict" if value == 1.0 else "the verdict changes")
            + "; not a test (no p-value, outside the Holm family): each verdict is adjusted in its own family"
        )
        # not a test: the agreement against its threshold, exactly (the p's of an exact row, then dropped)
        agreed = verdict(*one_sided(value, 0.0, th[CLAIMS["9a"].threshold], CLAIMS["9a"].direction))
        out.append(
            row(
                "9a",
                f"{paper['claim_id']}: {paper['setting']}",
                (value, 0.0),
                th,
                note=note,
                decided=agreed,
                kind="agreement",
                layer=None if paper["layer"] != paper["layer"] else paper["layer"],
                label=f"{paper['claim_id']} {paper['label']}",
                model=paper.get("model"),
                compared_claim=paper["claim_id"],
                official_value=paper["value"],
                official_uncertainty=paper["uncertainty"],
                official_verdict=paper["verdict"],
                exact_value=twin["value"],
                exact_uncertainty=twin["uncertainty"],
                exact_verdict=twin["verdict"],
                law_change=twin["value"] - paper["value"],
                law_change_uncertainty=math.hypot(twin["uncertainty"], paper["uncertainty"]),
            )
        )
    if not out:
        out.append(
            absent_row("9a", th, f"exact-law twins ({', '.join(sorted(data.twins.values()))}) enter no claim's numbers")
        )
    return out
