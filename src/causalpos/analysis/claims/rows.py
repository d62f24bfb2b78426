"""One ledger row from a metric's replicates, and the simulation settings a claim is measured in."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from causalpos.analysis.claims.catalogue import CLAIMS, VERDICTS, verdict
from causalpos.analysis.claims.replicates import PAPER_D, PAPER_LAW, SIM_PARAMS, VARIANT_KEYS, estimate


def row(claim_id: str, setting: str, values, thresholds: dict, note: str = "", layer=None, label: str = "",
        decided: str | None = None, **extra) -> dict:
    """A ledger row from [estimate, replicates...] (or (value, uncertainty) for precomputed ones).

    `decided`: the verdict of a claim whose rule is not "value beyond threshold by z uncertainties" (a test
    row by row, an agreement of several regions); the builder's docstring states the rule."""
    claim = CLAIMS[claim_id]
    if isinstance(values, tuple):
        value, se = values
    elif values is None:
        value, se = math.nan, math.nan
    else:
        value, se = estimate(values)
    threshold = float(thresholds[claim.threshold])
    if decided is not None:
        if decided not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {decided!r}")
        result = decided
    else:
        result = verdict(value, se, threshold, claim.direction.rstrip("="), thresholds["z"])
        if np.isfinite(value) and not np.isfinite(se):
            note = "; ".join(filter(None, [note, "no uncertainty available, so no verdict"]))
    return {"claim_id": claim.id, "section": claim.section, "statement": claim.statement, "setting": setting,
            "metric": claim.metric, "value": value, "uncertainty": se, "threshold": threshold, "verdict": result,
            "claim": claim.number, "title": claim.title, "direction": claim.direction, "unit": claim.unit,
            "z": float(thresholds["z"]),
            "layer": np.nan if layer is None else int(layer), "label": label or setting, "note": note, **extra}


def absent_row(claim_id: str, thresholds: dict, why: str) -> dict:
    return row(claim_id, "(no such setting)", None, thresholds, note=why, label="none")


def paper_layer(layer: int) -> str:
    return f"layer {layer + 1} (paper)"


def setting_label(p) -> str:
    """Short description of a simulation variant from its parameters."""
    parts = ["LayerNorm" if p["norm"] == "layernorm" else "l2"]
    if p["scale"] != "none":
        parts.append({"sqrt_d": "√d scaling", "d": "d scaling"}.get(p["scale"], p["scale"]))
    if p["pe"] == "rope":
        parts.append("RoPE" if float(p["rope_theta"]) == 10000.0 else f"RoPE θ={float(p['rope_theta']):g}")
    if p["mask"] == "none":
        parts.append("no mask")
    if not bool(p["residual"]):
        parts.append("no residual")
    parts.append(f"α={float(p['alpha']):g}")
    parts.append(f"d={int(p['d'])}")
    if p.get("law", PAPER_LAW) != PAPER_LAW:
        parts.append(f"{p['law']} law")
    return ", ".join(parts)


def law_suffix(p) -> str:
    """", official" for a variant of another input law than the paper's, else "" (for short labels)."""
    return "" if p.get("law", PAPER_LAW) == PAPER_LAW else f", {p['law']}"


def select_variants(params: pd.DataFrame | None, **where) -> pd.DataFrame:
    if params is None:
        return pd.DataFrame(columns=VARIANT_KEYS)
    keep = np.ones(len(params), dtype=bool)
    for column, value in where.items():
        if column == "alpha":
            keep &= np.isclose(params["alpha"].to_numpy(float), value)
        else:
            keep &= (params[column] == value).to_numpy()
    return params[keep]


def reference_d(params: pd.DataFrame) -> pd.DataFrame:
    """One variant per combination of the parameters other than d and the depth: the paper's d = 64 if
    present, else the largest d (the closest to the closed form); then the deepest; ties by variant name."""
    if params.empty:
        return params
    others = [c for c in VARIANT_KEYS if c not in ("d", "n_layers") and c in params.columns]
    chosen = []
    for _, rows in params.groupby(others, sort=True):
        pick = rows[rows["d"] == PAPER_D] if (rows["d"] == PAPER_D).any() else rows[rows["d"] == rows["d"].max()]
        pick = pick[pick["n_layers"] == pick["n_layers"].max()]
        chosen.append(pick.index.min())
    return params.loc[sorted(chosen, key=lambda v: (params.loc[v, "alpha"], str(v)))]


def partner_variant(params: pd.DataFrame, variant: str, **change) -> str | None:
    """The variant with the same parameters as `variant` except those in `change` (any depth: the deepest,
    then the first by name). Of the same input law if there is one, else of any (the paper's first): at
    alpha = 0 the two laws are the same law (i.i.d. uniform on the sphere)."""
    p = params.loc[variant]
    where = {c: p[c] for c in SIM_PARAMS if c != "n_layers"}
    where.update(change)
    hits = select_variants(params, **where)
    if hits.empty:
        return None
    law = p.get("law", PAPER_LAW)
    laws = hits["law"] if "law" in hits.columns else pd.Series(PAPER_LAW, index=hits.index)
    return str(min(hits.index, key=lambda v: (laws[v] != law, laws[v] != PAPER_LAW, -int(hits.loc[v, "n_layers"]),
                                              str(v))))


BASE = dict(norm="l2", scale="none", pe="none", mask="causal", residual=True)
