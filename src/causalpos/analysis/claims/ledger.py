"""The ledger: every claim builder in order (build_ledger) and the ledger as Markdown (ledger_markdown)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from causalpos.analysis.claims import closed_forms, models, robustness, simulation, stages
from causalpos.analysis.claims.catalogue import (CLAIMS, EXTRA_COLUMNS, LEDGER_COLUMNS, THRESHOLDS, VERDICTS,
                                                 merge_thresholds)
from causalpos.analysis.claims.replicates import LedgerInputs

# the builders that read the simulation tables, in claim order: built again on the official-law twins (claim 9a)
SIM_BUILDERS = (simulation.claim1, closed_forms.claim1_appendix, simulation.claim2, simulation.claim3,
                simulation.claim4, simulation.claim5, simulation.claim6, models.claim7)
BUILDERS = SIM_BUILDERS + (stages.claim7_stages, models.claim8)


def build_ledger(simulations: pd.DataFrame | None, theory: pd.DataFrame | None, scores: pd.DataFrame | None,
                 intermediates: pd.DataFrame | None, groups: pd.DataFrame | None, thresholds: dict | None = None,
                 n_bootstrap: int = 200, seed: int = 0) -> pd.DataFrame:
    """The claims ledger: one row per claim and setting (see the module docstring), claims in order 1a .. 9a.

    Any table may be None or empty: the claims that need it get rows with value NaN, verdict
    "inconclusive" and a note. A table missing a needed column raises ValueError.
    """
    th = merge_thresholds(thresholds)
    if int(n_bootstrap) < 2:
        raise ValueError(f"n_bootstrap must be >= 2 to estimate an uncertainty, got {n_bootstrap}")
    data = LedgerInputs(simulations, theory, scores, intermediates, groups, int(n_bootstrap), int(seed))
    rows = []
    for build in BUILDERS:
        rows.extend(build(data, th))
    twin_rows = []
    if data.twins:
        twins = data.twin_view()
        for build in SIM_BUILDERS:
            twin_rows.extend(build(twins, th))
    rows.extend(robustness.claim9(rows, twin_rows, data, th))
    ledger = pd.DataFrame(rows)
    for column in EXTRA_COLUMNS:
        if column not in ledger.columns:
            ledger[column] = np.nan
    ledger["layer"] = ledger["layer"].astype("Int64")
    return ledger[LEDGER_COLUMNS + EXTRA_COLUMNS].reset_index(drop=True)


def format_value(value: float, se: float) -> str:
    """value ± se with the decimals of se's second significant digit (3 significant digits without se)."""
    if np.isinf(value):
        return "∞" if value > 0 else "-∞"
    if not np.isfinite(value):
        return "n/a"
    if not np.isfinite(se) or se <= 0:
        return f"{value:.3g}"
    decimals = max(0, 1 - int(math.floor(math.log10(se))))
    if decimals > 7 or abs(value) >= 1e5:
        return f"{value:.3g} ± {se:.2g}"
    return f"{value:.{decimals}f} ± {se:.{decimals}f}"


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def ledger_z(ledger: pd.DataFrame) -> float:
    if "z" in ledger.columns and ledger["z"].notna().any():
        return float(ledger["z"].dropna().iloc[0])
    return THRESHOLDS["z"]


# per model and layer (8a, 8d): one summary line per model, the layers in a table below
PER_LAYER = tuple(claim.id for claim in CLAIMS.values() if claim.per_layer)


def verdict_cell(verdict: str) -> str:
    return f"**{verdict}**" if verdict != "inconclusive" else verdict


def counts_text(verdicts: pd.Series) -> str:
    counts = verdicts.value_counts()
    return ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)


def threshold_text(row) -> str:
    return f"{row['direction']} {row['threshold']:g}"


def ledger_markdown(ledger: pd.DataFrame) -> str:
    """The ledger as Markdown: one table of every claim (its statement on its first row; the per-layer claims
    8a and 8d summarised per model, claim 9a in one line), then a table of claims 8a and 8d per model and
    layer, and one of claim 9a's comparisons of the two input laws."""
    z = ledger_z(ledger)
    lines = [
        "Each row is one claim of the paper measured in one setting: value ± one standard error (Monte Carlo "
        "standard errors for the simulations, a bootstrap over sequences for the trained and pretrained "
        f"models). A claim is **supported** where the value clears its threshold by more than {z:g} standard "
        f"errors, **not supported** where it misses it by more than {z:g}, and inconclusive in between; claims "
        "2c (a test row by row) and 6b (several regions that must agree) have their own rule, in their notes and "
        "in `src/causalpos/analysis/claims/`. Closed forms (1c-1e) are exact: no uncertainty. Layers are "
        "numbered as in the paper (from 1), positions from 0 as in the tables.",
        "",
        "| claim | setting | metric | value | threshold | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    per_layer = ledger[ledger["claim_id"].isin(PER_LAYER) & ledger["layer"].notna()]
    law = ledger[(ledger["claim_id"] == "9a") & ledger["compared_claim"].notna()] \
        if "compared_claim" in ledger.columns else ledger.iloc[:0]
    previous, summarised = None, set()
    for _, row in ledger.iterrows():
        first = row["claim_id"] != previous
        previous = row["claim_id"]
        claim = f"**{row['claim_id']}** {cell(row['statement'])} ({row['section']})" if first else ""
        metric = cell(row["metric"]) if first else "″"
        if row["claim_id"] in PER_LAYER and pd.notna(row["layer"]):  # one line per model, the layers below
            if (row["claim_id"], row["model"]) in summarised:
                continue
            summarised.add((row["claim_id"], row["model"]))
            rows = per_layer[(per_layer["claim_id"] == row["claim_id"]) & (per_layer["model"] == row["model"])]
            lines.append(f"| {claim} | {cell(row['model'])}, each of {len(rows)} layers | {metric} | see below | "
                         f"{threshold_text(row)} | {counts_text(rows['verdict'])} |")
            continue
        if row["claim_id"] == "9a" and len(law) and pd.notna(row.get("compared_claim")):
            if "9a" in summarised:
                continue
            summarised.add("9a")
            text = f"{len(law)} claim and setting pairs: {counts_text(law['verdict'])}"
            lines.append(f"| {claim} | official-law twins, {len(law)} comparisons (below) | {metric} | "
                         f"{(law['value'] == 1).sum()} of {len(law)} the same | {threshold_text(row)} | {text} |")
            continue
        value = format_value(row["value"], row["uncertainty"])
        lines.append(f"| {claim} | {cell(row['setting'])} | {metric} | {value} | {threshold_text(row)} | "
                     f"{verdict_cell(row['verdict'])} |")
    if len(per_layer):
        lines += ["", "Claims 8a and 8d per layer. Non-relative amplitude (8a): the RMS of the scores' departure from "
                  "a function of i - j over the RMS spread of the scores, over keys >= 1 (the verdict's metric) and "
                  "with the attention-sink key 0. Range ratio: the 1%-99% range of the diagonal-normalised pattern "
                  "over that of the raw scores (8c takes its median). Left-region deficit: the mean band-centred "
                  "score of keys 1 to S/4 in score SDs (< 0: the first keys score lower than their diagonals, > 0: "
                  "higher). First keys (8d): the same for keys 1-4, and for key 0 alone.", "",
                  "| model | layer | 8a amplitude, keys >= 1 | with key 0 | range ratio | left-region deficit | "
                  "8a verdict | 8d keys 1-4 | key 0 | 8d verdict |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        amp = per_layer[per_layer["claim_id"] == "8a"].set_index(["model", "layer"])
        first = per_layer[per_layer["claim_id"] == "8d"].set_index(["model", "layer"])
        for key in dict.fromkeys(list(amp.index) + list(first.index)):
            a = amp.loc[key] if key in amp.index else None
            f = first.loc[key] if key in first.index else None

            def pick(frame, value, se):
                return "" if frame is None else format_value(frame[value], frame[se])

            lines.append(f"| {cell(key[0])} | {int(key[1]) + 1} | {pick(a, 'value', 'uncertainty')} | "
                         f"{pick(a, 'value_with_sink', 'uncertainty_with_sink')} | "
                         f"{pick(a, 'range_ratio', 'range_ratio_uncertainty')} | "
                         f"{pick(a, 'left_deficit', 'left_deficit_uncertainty')} | "
                         f"{'' if a is None else a['verdict']} | {pick(f, 'value', 'uncertainty')} | "
                         f"{pick(f, 'sink_emphasis', 'sink_emphasis_uncertainty')} | "
                         f"{'' if f is None else f['verdict']} |")
    if len(law):
        lines += ["", "Claim 9a: each claim and setting measured on a paper-law variant that has an official-law twin "
                  "(the authors' notebooks' inputs: the same parameters but the sampler), measured again with the "
                  "twin in its place, and both verdicts.", "",
                  "| claim | setting | paper law | official law | verdicts |", "| --- | --- | --- | --- | --- |"]
        for _, row in law.iterrows():
            same = {1.0: "the same", 0.5: "one inconclusive", 0.0: "**opposite**"}.get(float(row["value"]), "")
            setting = str(row["setting"]).split(": ", 1)[-1]
            lines.append(f"| {row['compared_claim']} | {cell(setting)} | "
                         f"{format_value(row['paper_value'], row['paper_uncertainty'])}, {row['paper_verdict']} | "
                         f"{format_value(row['official_value'], row['official_uncertainty'])}, "
                         f"{row['official_verdict']} | {same} |")
    return "\n".join(lines) + "\n"
