"""The ledger: every claim builder in order (build_ledger) and the ledger as Markdown (ledger_markdown)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from causalpos.analysis.claims import models, simulation
from causalpos.analysis.claims.catalogue import EXTRA_COLUMNS, LEDGER_COLUMNS, THRESHOLDS, VERDICTS, merge_thresholds
from causalpos.analysis.claims.replicates import LedgerInputs

BUILDERS = (simulation.claim1, simulation.claim2, simulation.claim3, simulation.claim4, simulation.claim5,
            simulation.claim6, models.claim7, models.claim8)


def build_ledger(simulations: pd.DataFrame | None, theory: pd.DataFrame | None, scores: pd.DataFrame | None,
                 intermediates: pd.DataFrame | None, groups: pd.DataFrame | None, thresholds: dict | None = None,
                 n_bootstrap: int = 200, seed: int = 0) -> pd.DataFrame:
    """The claims ledger: one row per claim and setting (see the module docstring), claims in order 1a .. 8b.

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
    ledger = pd.DataFrame(rows)
    for column in EXTRA_COLUMNS:
        if column not in ledger.columns:
            ledger[column] = np.nan
    ledger["layer"] = ledger["layer"].astype("Int64")
    return ledger[LEDGER_COLUMNS + EXTRA_COLUMNS].reset_index(drop=True)


def format_value(value: float, se: float) -> str:
    """value ± se with the decimals of se's second significant digit (3 significant digits without se)."""
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


def ledger_markdown(ledger: pd.DataFrame) -> str:
    """The ledger as Markdown: one table of every claim (its statement on its first row; claim 8a summarised
    per model), then a table of claim 8a per model and layer."""
    z = ledger_z(ledger)
    lines = [
        "Each row is one claim of the paper measured in one setting: value ± one standard error (Monte Carlo "
        "standard errors for the simulations, a bootstrap over sequences for the trained and pretrained "
        f"models). A claim is **supported** where the value clears its threshold by more than {z:g} standard "
        f"errors, **not supported** where it misses it by more than {z:g}, and inconclusive in between. "
        "Layers are numbered as in the paper (from 1). Metrics and thresholds: `src/causalpos/analysis/claims/`.",
        "",
        "| claim | setting | metric | value | threshold | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    per_layer = ledger[(ledger["claim_id"] == "8a") & ledger["layer"].notna()]
    previous, summarised = None, set()
    for _, row in ledger.iterrows():
        first = row["claim_id"] != previous
        previous = row["claim_id"]
        claim = f"**{row['claim_id']}** {cell(row['statement'])} ({row['section']})" if first else ""
        metric = cell(row["metric"]) if first else "″"
        if row["claim_id"] == "8a" and pd.notna(row["layer"]):  # one line per model, the layers below
            if row["model"] in summarised:
                continue
            summarised.add(row["model"])
            rows = per_layer[per_layer["model"] == row["model"]]
            counts = rows["verdict"].value_counts()
            text = ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)
            lines.append(f"| {claim} | {cell(row['model'])}, each of {len(rows)} layers | {metric} | see below | "
                         f"{row['direction']} {row['threshold']:g} | {text} |")
            continue
        verdict_text = f"**{row['verdict']}**" if row["verdict"] != "inconclusive" else row["verdict"]
        lines.append(f"| {claim} | {cell(row['setting'])} | {metric} | {format_value(row['value'], row['uncertainty'])} "
                     f"| {row['direction']} {row['threshold']:g} | {verdict_text} |")
    if len(per_layer):
        lines += ["", "Claim 8a per layer. Non-relative amplitude: the RMS of the scores' departure from a function "
                  "of i - j over the RMS spread of the scores, over keys >= 1 (the verdict's metric) and with the "
                  "attention-sink key 0. Left-region deficit: the mean band-centred score of keys 1 to S/4 in score "
                  "SDs (< 0: the first keys score lower than their diagonals, > 0: higher).", "",
                  "| model | layer | amplitude, keys >= 1 | with key 0 | left-region deficit | verdict |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for _, row in per_layer.iterrows():
            lines.append(f"| {cell(row['model'])} | {int(row['layer']) + 1} | "
                         f"{format_value(row['value'], row['uncertainty'])} | "
                         f"{format_value(row['value_with_sink'], row['uncertainty_with_sink'])} | "
                         f"{format_value(row['left_deficit'], row['left_deficit_uncertainty'])} | {row['verdict']} |")
    return "\n".join(lines) + "\n"
