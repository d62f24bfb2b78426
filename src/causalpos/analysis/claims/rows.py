"""One ledger row from a metric's replicates, and the simulation settings a claim is measured in."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from causalpos.catalogue.claims import CLAIMS, VERDICTS, verdict
from causalpos.catalogue.readings import ROW_KINDS
from causalpos.analysis.claims.family import one_sided
from causalpos.analysis.claims.replicates import MAIN_LAW, PAPER_D, SIM_PARAMS, VARIANT_KEYS, estimate


def row(
    claim_id: str,
    setting: str,
    values,
    thresholds: dict,
    note: str = "",
    layer=None,
    label: str = "",
    decided: str | None = None,
    p_value: float | None = None,
    p_against: float | None = None,
    df: int | None = None,
    kind: str | None = None,
    reference: str | None = None,
    **extra,
) -> dict:
    """A ledger row from [estimate, replicates...] (or (value, uncertainty) for precomputed ones).

    The row carries its one-sided p's (family.one_sided: the value against the threshold on the claim's
    side, and on the other) and the verdict they give unadjusted (a family of one); ledger.build_ledger then
    adjusts the p's over the ledger (family.adjust) and the verdict with them. A precomputed (value, 0.0) is
    exact (closed forms, symbolic checks): p 0 or 1, outside the Holm family. A claim made of sub-tests (2c's
    steps, 6b's regions) passes its own `p_value` and `p_against` (family.intersection_union,
    family.bonferroni_min; the builder's docstring states the rule). `decided`: the verdict of a row that is
    not a test (9a compares two verdicts; "by construction"): its p's are NaN and it stays outside the family.

    `df`: the p's from Student's t with df degrees of freedom (a bootstrap over G groups of sequences: G - 1)
    instead of the normal. Replicates that never vary (SE 0, not exact) get the bootstrap's own bound, p =
    1 / (R + 1) with R replicates, not 0. `kind` (catalogue.readings.ROW_KINDS; default: exact, test, or by
    construction / decision for a `decided` row) and `reference` (what the p's are referred to, for p's the
    caller passes; default normal) fill the columns row_kind and reference."""
    claim = CLAIMS[claim_id]
    exact, n_replicates = False, 0
    if isinstance(values, tuple):  # precomputed; uncertainty 0 here = exact (closed forms, symbolic checks)
        value, se = values
        exact = se == 0
    elif values is None:
        value, se = math.nan, math.nan
    else:
        value, se = estimate(values)
        n_replicates = np.asarray(values).size - 1
    threshold = float(thresholds[claim.threshold])
    alpha = float(thresholds["family_alpha"])
    if decided is not None:
        if decided not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {decided!r}")
        if p_value is not None or p_against is not None:
            raise ValueError("a row's verdict comes from its p-values or from `decided` (not a test), not both")
        p_value = p_against = math.nan
        result = decided
        kind = kind or ("by construction" if decided == "by construction" else "decision")
        reference = "none"
    else:
        kind = kind or ("exact" if exact else "test")
        if p_value is None and p_against is None:
            side = claim.direction.rstrip("=")
            if exact:
                p_value, p_against = one_sided(value, se, threshold, side)
                reference = "exact"
            elif se == 0 and n_replicates:  # no replicate on the other side: p is 1 / (R + 1), not 0
                bound = 1.0 / (n_replicates + 1)
                p_value, p_against = (max(p, bound) for p in one_sided(value, se, threshold, side))
                reference = "bootstrap bound"
            else:
                p_value, p_against = one_sided(value, se, threshold, side, df)
                reference = f"t({df})" if df is not None else "normal"
        elif p_value is None or p_against is None:
            raise ValueError("a row with its own p-values needs both p_value and p_against")
        else:
            reference = reference or "normal"
        p_value, p_against = float(p_value), float(p_against)
        result = verdict(p_value, p_against, alpha)
        if np.isfinite(value) and not np.isfinite(p_value):
            note = "; ".join(filter(None, [note, "no uncertainty available, so no verdict"]))
    if kind not in ROW_KINDS:
        raise ValueError(f"row kind must be one of {ROW_KINDS}, got {kind!r}")
    return {
        "claim_id": claim.id,
        "section": claim.section,
        "statement": claim.statement,
        "setting": setting,
        "metric": claim.metric,
        "value": value,
        "uncertainty": se,
        "threshold": threshold,
        "verdict": result,
        "row_kind": kind,
        "reference": reference if np.isfinite(p_value) or decided is not None else "none",
        "ours": "",
        "p_value": p_value,
        "p_adjusted": p_value,
        "p_against": p_against,
        "p_against_adjusted": p_against,
        "exact": bool(exact),
        "claim": claim.number,
        "title": claim.title,
        "direction": claim.direction,
        "unit": claim.unit,
        "alpha": alpha,
        "layer": np.nan if layer is None else int(layer),
        "label": label or setting,
        "note": note,
        **extra,
    }


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
    if p.get("law", MAIN_LAW) != MAIN_LAW:
        parts.append(f"{p['law']} law")
    return ", ".join(parts)


def law_suffix(p) -> str:
    """ ", exact" for a variant of another input law than the main one, else "" (for short labels)."""
    return "" if p.get("law", MAIN_LAW) == MAIN_LAW else f", {p['law']}"


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
    then the first by name). Of the same input law if there is one, else of any (the main law first): at
    alpha = 0 the two laws are the same law (i.i.d. uniform on the sphere)."""
    p = params.loc[variant]
    where = {c: p[c] for c in SIM_PARAMS if c != "n_layers"}
    where.update(change)
    hits = select_variants(params, **where)
    if hits.empty:
        return None
    law = p.get("law", MAIN_LAW)
    laws = hits["law"] if "law" in hits.columns else pd.Series(MAIN_LAW, index=hits.index)
    return str(
        min(hits.index, key=lambda v: (laws[v] != law, laws[v] != MAIN_LAW, -int(hits.loc[v, "n_layers"]), str(v)))
    )


BASE = dict(norm="l2", scale="none", pe="none", mask="causal", residual=True)
