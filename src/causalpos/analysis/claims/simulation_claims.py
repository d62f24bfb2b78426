"""Claims 1a-1b and 2-6: the parameter-free decoder (Sections 3, 4.1, 5.1; Appendices B, D), on the simulations.
(Claims 1c-1f, Appendix A's closed forms, are in closed_forms.py.)

Each builder takes the LedgerInputs and the thresholds and returns ledger rows; its docstring says why
its metric measures the claim.
"""

from __future__ import annotations

import numpy as np

from causalpos.catalogue.claims import verdict
from causalpos.analysis.claims.family import band_pvalues, increase_pvalues, one_sided
from causalpos.analysis.claims.replicates import MAIN_LAW, Field, LedgerInputs, amplitude, debias, estimate
from causalpos.analysis.claims.rows import (
    BASE,
    absent_row,
    law_suffix,
    paper_layer,
    partner_variant,
    reference_d,
    row,
    select_variants,
    setting_label,
)
from causalpos.analysis.multiplicity import intersection_union
from causalpos.analysis.triangles import (
    antisymmetric_share,
    concordance,
    diagonal_mean,
    eq4_r2,
    mean_squared_gap,
    nearer_key_advantage,
    noise_units_nonrelative,
    nonrelative_share,
    pack,
    query_share,
    region_deficits,
    safe_ratio,
    strict_increase,
    unsaturated_share,
)


def claim1(data: LedgerInputs, th: dict) -> list[dict]:
    """Eq. 4 against Monte Carlo (settings: every l2 / no scaling / no PE / causal / residual variant with
    >= 2 layers whose alpha the theory table has; grouped by d).

    1a: R² = 1 - SS(MC - Eq. 4) / SS(MC - mean MC) over the off-diagonal pairs of layer 2 (paper): the share
    of the Monte Carlo score variance the closed form explains (the diagonal is 1 in both). Eq. 4 is exact
    only for the expected inner products (d -> infinity), so a finite-d Monte Carlo differs by O(1/d) and
    agreement is a tolerance (R² > 0.9), not equality within the standard errors. Bias-corrected.
    1b: the slope of log RMS(MC - Eq. 4) against log d over the d values of one alpha (least squares,
    noise-corrected mean squares): negative = the gap shrinks as d grows (about -1 if it goes as 1/d).
    """
    rows_a, rows_b = [], []
    candidates = select_variants(data.params, **BASE)
    candidates = candidates[candidates["n_layers"] >= 2] if len(candidates) else candidates
    if data.theory is None or candidates.empty:
        why = (
            "no theory table"
            if data.theory is None
            else "no variant with norm=l2, scale=none, pe=none, mask=causal, residual=True and >= 2 layers"
        )
        return [absent_row("1a", th, why), absent_row("1b", th, why)]
    theory = data.theory.assign(
        alpha=data.theory["alpha"].astype(float).round(9), residual=data.theory["residual"].astype(bool)
    )
    order = candidates.sort_values(["alpha", "d"]).index
    series = {}
    for variant in order:
        p = candidates.loc[variant]
        field = data.sim_field(variant, 1)
        cf_rows = theory[np.isclose(theory["alpha"], p["alpha"]) & theory["residual"]]
        cf_rows = cf_rows.drop_duplicates(["query_pos", "key_pos"])
        setting = setting_label(p)
        if cf_rows.empty or field is None:
            rows_a.append(
                row(
                    "1a",
                    setting,
                    None,
                    th,
                    note=f"variant {variant}: theory table has no alpha = {p['alpha']:g} with residual",
                    label=f"α={p['alpha']:g}, d={int(p['d'])}",
                )
            )
            continue
        (cf,) = pack(cf_rows, ["score"], field.size)
        if np.isnan(cf).any():
            rows_a.append(
                row(
                    "1a",
                    setting,
                    None,
                    th,
                    note=f"variant {variant}: theory table does not cover seq_len {field.size}",
                    label=f"α={p['alpha']:g}, d={int(p['d'])}",
                )
            )
            continue
        r2 = debias(eq4_r2(field.x, cf, field.size))
        msg = mean_squared_gap(field.x, cf, field.size)
        rmsg = amplitude(msg)
        note = f"variant {variant}; RMS gap {rmsg[0]:.2g}"
        rows_a.append(row("1a", setting, r2, th, note=note, layer=1, label=f"α={p['alpha']:g}, d={int(p['d'])}"))
        series.setdefault((p["alpha"], p["seq_len"]), []).append((int(p["d"]), debias(msg), variant))
    for (alpha, _), points in series.items():
        by_d = {}
        for d, msg, variant in points:  # one variant per d (the first by name where several share it)
            by_d.setdefault(d, (d, msg, variant))
        points = [by_d[d] for d in sorted(by_d)]
        if len(points) < 2:
            continue
        usable = [(d, m) for d, m, _ in points if m[0] > 0]
        dropped = [d for d, m, _ in points if not m[0] > 0]
        setting = f"l2, α={alpha:g}, d={'/'.join(str(d) for d, _, _ in points)}"
        note = f"variants {', '.join(v for _, _, v in points)}"
        if dropped:
            note += f"; gap below the noise at d = {dropped}, left out"
        if len(usable) < 2:
            rows_b.append(
                row("1b", setting, None, th, note=note + "; fewer than 2 resolved gaps", label=f"α={alpha:g}")
            )
            continue
        logd = np.log([d for d, _ in usable])
        logd = logd - logd.mean()
        loggap = 0.5 * np.log(np.clip(np.stack([m for _, m in usable]), 1e-300, None))  # [n_d, 1 + R]
        slope = (logd @ (loggap - loggap.mean(axis=0))) / (logd @ logd)
        rows_b.append(row("1b", setting, slope, th, note=note, layer=1, label=f"α={alpha:g}"))
    if not rows_b:
        rows_b.append(absent_row("1b", th, "no alpha with Monte Carlo variants at two or more d values"))
    return rows_a + rows_b


def claim2(data: LedgerInputs, th: dict) -> list[dict]:
    """Nearer keys score higher at layer 2 (paper), more so in layers 3 and 4 (paper).

    2a (every l2 / no scaling / no PE / causal / residual variant at the reference d, each alpha): the
    key-order concordance of layer 2 (paper): over all pairs of off-diagonal keys j < j' < i of every row,
    the share where s(i, j') > s(i, j). Section 3.2 proves strict increase for every fixed i, i.e. 1; 0.5 is
    no order and a decreasing matrix gives 0. The diagonal (= 1 > every other entry, the j = i - 1 step of
    the proof) is left out because it holds trivially.
    2b (the same variants at alpha = 0, the case Section 4.1 describes): the nearer-key advantage A_l (mean
    over the same key pairs of s(i, j') - s(i, j), in score units = cosines) of layer l over that of layer 2
    (paper), for each later layer: > 1 = the increasing pattern is stronger there ("more pronounced").
    2c (the 2a variants, every layer from 2 (paper) on): "strictly increasing for j <= i with fixed i" is a
    statement about every row and every step, which no average can test. Its p's (family.increase_pvalues)
    come from the differences of the matrix's entries, each over its standard error (from the replicates).
    For the claim, an intersection-union test: strict increase needs every adjacent step s(i, j+1) - s(i, j)
    > 0 (keys j + 1 < i; the diagonal is left out), so p_value is the largest one-sided p over those steps, no
    multiplicity penalty (it is small only if every step is resolved). Against it, a union: any pair of keys
    j < j' < i of the matrix with s(i, j') < s(i, j) (comparing all pairs, not only neighbours, finds a slow
    decline of many steps each within the noise: a row that peaks before its last key); p_against is the
    Bonferroni min(1, pairs x the smallest pair p). Both then enter the ledger's Holm as one row. Value (the
    metric, descriptive): the share of rows resolved rising by triangles.strict_increase at family_alpha,
    Bonferroni over the pairs (no pair resolvedly decreasing, the nearest key resolvedly above the first).
    The note gives the weakest step, the strongest decrease, and names the rows strict_increase finds
    violated, their worst pair and where they peak (0-based positions, as in the tables).
    """
    rows_a, rows_b, rows_c = [], [], []
    variants = reference_d(select_variants(data.params, **BASE))
    variants = variants[variants["n_layers"] >= 2] if len(variants) else variants
    for variant, p in variants.iterrows():
        field = data.sim_field(variant, 1)
        rows_a.append(
            row(
                "2a",
                setting_label(p),
                concordance(field.x, field.size),
                th,
                note=f"variant {variant}",
                layer=1,
                label=f"α={p['alpha']:g}{law_suffix(p)}",
            )
        )
        for layer in range(1, int(p["n_layers"])):
            rows_c.append(strictness_row(data.sim_field(variant, layer), variant, p, layer, th))
    if not rows_a:
        why = "no l2 / no scaling / no PE / causal / residual variant with >= 2 layers"
        rows_a.append(absent_row("2a", th, why))
        rows_c.append(absent_row("2c", th, why))
    zero = variants[np.isclose(variants["alpha"].astype(float), 0.0)] if len(variants) else variants
    for variant, p in zero.iterrows():
        base = data.sim_field(variant, 1)
        a2 = nearer_key_advantage(base.x, base.size)
        for layer in range(2, int(p["n_layers"])):
            field = data.sim_field(variant, layer)
            ratio = safe_ratio(nearer_key_advantage(field.x, field.size), a2)
            note = f"variant {variant}"
            if not a2[0] > 0:
                ratio, note = None, note + "; no increase at layer 2 (paper) to compare with"
            rows_b.append(
                row(
                    "2b",
                    f"{setting_label(p)}, {paper_layer(layer)}",
                    ratio,
                    th,
                    note=note,
                    layer=layer,
                    label=f"L{layer + 1}{law_suffix(p)}",
                )
            )
    if not rows_b:
        rows_b.append(absent_row("2b", th, "no alpha = 0 l2 variant with >= 3 layers"))
    return rows_a + rows_b + rows_c


def spans(values) -> str:
    """Sorted integers as runs: 3, 5-9, 12."""
    values = sorted(set(int(v) for v in values))
    runs, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            runs.append(f"{start}" if start == v else f"{start}-{v}")
            start = None
    return ", ".join(runs)


def strictness_note(result: dict) -> str:
    """Where a strictness test fails: rows, their worst pair and their peaks (0-based positions)."""
    text = (
        f"{result['rows']} rows: {result['rising']} rising, {result['violated']} violated, "
        f"{result['unresolved']} flat within the noise (family-wise z = {result['z']:.2f})"
    )
    if result["violations"]:
        q, j, jj, t = min(result["violations"], key=lambda v: v[3])
        text += (
            f"; violated queries {spans(v[0] for v in result['violations'])} (0-based); worst: query {q}, "
            f"key {j} above key {jj} by {-t:.1f} SE"
        )
        q, peak, gap = result["peaks"][-1]
        text += f"; query {q} peaks at key {peak}, {gap:.1f} SE above key {q - 1}"
    return text


def strictness_row(field: Field, variant: str, p, layer: int, th: dict) -> dict:
    result = strict_increase(field.x, field.size, 0, th["family_alpha"])
    tests = increase_pvalues(field.x, field.size, 0)
    note = f"variant {variant}; {strictness_note(result)}"
    if tests["weakest"] is not None:
        q, j, z = tests["weakest"]
        note += f"; weakest of {tests['steps']} steps: query {q}, key {j} to {j + 1}, {z:.1f} SE"
        q, j, jj, z = tests["strongest"]
        if not result["violations"]:  # else strictness_note names the worst pair already
            note += f"; of {tests['pairs']} pairs the least increasing: query {q}, key {jj} minus key {j} {z:+.1f} SE"
    return row(
        "2c",
        f"{setting_label(p)}, {paper_layer(layer)}",
        (result["rising_share"], np.nan),
        th,
        note=note,
        layer=layer,
        label=f"α={p['alpha']:g} L{layer + 1}{law_suffix(p)}",
        p_value=tests["p_value"],
        p_against=tests["p_against"],
    )


def claim3(data: LedgerInputs, th: dict) -> list[dict]:
    """alpha > 0: the layer-2 (paper) pattern is already there and independent of the query.

    3a (each l2 / no scaling / no PE / causal / residual variant with alpha > 0, reference d): the share of
    the off-diagonal layer-2 score variance left once the key position is known, 1 - eta²(score | key)
    (pooled within-key variance over total). Eq. 4 gives s = [g(i)/h(i)] / h(j); with alpha > 0 g(i)/h(i)
    tends to a constant (Section 4.1), so s depends on the key alone and the share is ~0; at alpha = 0 it
    decays as 1/i and dominates (share near 1, reported in the note). Bias-corrected.
    3b (same variants; partner: the alpha = 0 variant with the other parameters equal): the layer-2 (paper)
    nearer-key advantage at alpha over that at alpha = 0: > 1 = "much clearer compared to the alpha = 0
    case" already at layer 2, both in cosine units.
    3c (every l2 / no scaling / no PE / causal / residual variant at the reference d, consecutive alphas of one
    d and length): "with higher alpha value, the pattern faster saturate rapidly to a constant on j"
    (Appendix B, Figure 6, every layer shown). How far a row still is from its end value: the unsaturated
    share U = sum over rows i and keys j < i of (s(i, i-1) - s(i, j)) / sum over rows of (keys) x (s(i, i-1)
    - s(i, 0)) (triangles.unsaturated_share; 1/2 for a linear rise, 1/keys for a row that is constant after its
    first key). Ratio U(higher alpha) / U(lower alpha) per layer from 2 (paper) on; the largest counts
    (< 1 = faster saturation in every layer), every layer's ratio in the note.
    """
    rows_a, rows_b = [], []
    variants = reference_d(select_variants(data.params, **BASE))
    variants = (
        variants[(variants["n_layers"] >= 2) & (variants["alpha"].astype(float) > 0)] if len(variants) else variants
    )
    for variant, p in variants.iterrows():
        field = data.sim_field(variant, 1)
        zero = partner_variant(data.params, variant, alpha=0.0)
        note = f"variant {variant}"
        if zero is not None:
            z_field = data.sim_field(zero, 1)
            share0 = debias(query_share(z_field.x, z_field.size))[0]
            note_a = note + f"; at α=0 ({zero}): {share0:.3g}"
        else:
            note_a = note
        rows_a.append(
            row(
                "3a",
                setting_label(p),
                debias(query_share(field.x, field.size)),
                th,
                note=note_a,
                layer=1,
                label=f"α={p['alpha']:g}",
            )
        )
        if zero is None:
            rows_b.append(
                row(
                    "3b",
                    setting_label(p),
                    None,
                    th,
                    note=note + "; no α=0 variant with the other parameters equal",
                    label=f"α={p['alpha']:g}",
                )
            )
            continue
        z_field = data.sim_field(zero, 1)
        ratio = safe_ratio(nearer_key_advantage(field.x, field.size), nearer_key_advantage(z_field.x, z_field.size))
        rows_b.append(
            row("3b", setting_label(p), ratio, th, note=f"{note} against {zero}", layer=1, label=f"α={p['alpha']:g}")
        )
    if not rows_a:
        why = "no l2 / no scaling / no PE / causal / residual variant with alpha > 0"
        rows_a.append(absent_row("3a", th, why))
        rows_b.append(absent_row("3b", th, why))
    return rows_a + rows_b + saturation_rows(data, th)


def saturation_rows(data: LedgerInputs, th: dict) -> list[dict]:
    rows = []
    variants = reference_d(select_variants(data.params, **BASE))
    variants = variants[variants["n_layers"] >= 2] if len(variants) else variants
    for _, group in variants.groupby(["d", "seq_len"], sort=True) if len(variants) else []:
        # one variant per alpha: the main law first where two laws share an alpha
        group = group.assign(other_law=(group["law"] != MAIN_LAW)).sort_values(["alpha", "other_law"])
        group = group[~group["alpha"].duplicated()]
        for (lo, p_lo), (hi, p_hi) in zip(list(group.iterrows())[:-1], list(group.iterrows())[1:]):
            depth = min(int(p_lo["n_layers"]), int(p_hi["n_layers"]))
            ratios = np.stack(
                [
                    safe_ratio(
                        unsaturated_share(data.sim_field(hi, layer).x, int(p_hi["seq_len"])),
                        unsaturated_share(data.sim_field(lo, layer).x, int(p_lo["seq_len"])),
                    )
                    for layer in range(1, depth)
                ]
            )
            worst = int(np.argmax(ratios[:, 0])) + 1
            by_layer = ", ".join(f"{paper_layer(layer)} {r:.3g}" for layer, r in enumerate(ratios[:, 0], start=1))
            rows.append(
                row(
                    "3c",
                    f"{setting_label(p_hi)} vs α={p_lo['alpha']:g}{law_suffix(p_lo)}",
                    ratios.max(axis=0),
                    th,
                    note=f"{hi} vs {lo}; weakest at {paper_layer(worst)}; by layer: " + by_layer,
                    label=f"α={p_lo['alpha']:g}→{p_hi['alpha']:g}{law_suffix(p_hi)}",
                )
            )
    if not rows:
        rows.append(
            absent_row(
                "3c",
                th,
                "fewer than two alphas among the l2 / no scaling / no PE / causal / "
                "residual variants of one d and length",
            )
        )
    return rows


def layers_from_2(data: LedgerInputs, variant: str, n_layers: int) -> list[Field]:
    return [data.sim_field(variant, layer) for layer in range(1, n_layers)]


def claim4(data: LedgerInputs, th: dict) -> list[dict]:
    """Neither relative nor absolute (each l2 / no scaling / no PE / causal / residual variant, reference d;
    every layer from 2 (paper) on, the weakest counts).

    4a: non-relative amplitude = sqrt(Var(p) / Var(s)), p = s minus the mean of its band i - j, over the
    off-diagonal pairs (the square root of summary.nonrelativeness's index, bias-corrected for the noise
    floor): the RMS of what the distance does not explain, as a fraction of the RMS spread of the scores.
    A relative encoding gives uniform bands, 0; > 0.1 = a pattern the size the paper calls not negligible.
    4b: antisymmetric amplitude = sqrt(Var(a) / Var(s)), a = (s(i, j) - s(S-1-j, S-1-i)) / 2 the part that
    changes sign under reflection about the anti-diagonal. Absolute encodings give maps symmetric about that
    axis (Wang and Chen 2020), and so does any relative map, so both give 0.
    Layer 1 (paper) is left out: its off-diagonal scores are alpha plus noise, no pattern to classify.
    """
    rows_a, rows_b = [], []
    variants = reference_d(select_variants(data.params, **BASE))
    variants = variants[variants["n_layers"] >= 2] if len(variants) else variants
    for variant, p in variants.iterrows():
        fields = layers_from_2(data, variant, int(p["n_layers"]))
        nonrel = np.stack([amplitude(nonrelative_share(f.x, f.size)) for f in fields])
        anti = np.stack([amplitude(antisymmetric_share(f.x, f.size)) for f in fields])
        weakest = int(np.argmin(nonrel[:, 0])) + 1
        rows_a.append(
            row(
                "4a",
                f"{setting_label(p)}, layers 2-{int(p['n_layers'])} (paper)",
                nonrel.min(axis=0),
                th,
                note=f"variant {variant}; weakest at {paper_layer(weakest)}; by layer: "
                + ", ".join(f"{v:.3g}" for v in nonrel[:, 0]),
                label=f"α={p['alpha']:g}",
            )
        )
        weakest = int(np.argmin(anti[:, 0])) + 1
        rows_b.append(
            row(
                "4b",
                f"{setting_label(p)}, layers 2-{int(p['n_layers'])} (paper)",
                anti.min(axis=0),
                th,
                note=f"variant {variant}; weakest at {paper_layer(weakest)}; by layer: "
                + ", ".join(f"{v:.3g}" for v in anti[:, 0]),
                label=f"α={p['alpha']:g}",
            )
        )
    if not rows_a:
        why = "no l2 / no scaling / no PE / causal / residual variant with >= 2 layers"
        rows_a.append(absent_row("4a", th, why))
        rows_b.append(absent_row("4b", th, why))
    return rows_a + rows_b


def claim5(data: LedgerInputs, th: dict) -> list[dict]:
    """LayerNorm against l2 (Appendix B): each LayerNorm / no PE / causal / residual variant with sqrt_d (5a)
    or d (5b, 5c) scaling, paired with the l2 / no scaling variant of the same alpha, d and length.

    Strength = the nearer-key advantage (mean over key pairs j < j' < i of s(i, j') - s(i, j)) in cosine
    units: each layer's scores divided by the mean of its diagonal (a token's score with itself: 1 for l2
    and for LayerNorm with d scaling, sqrt(d) for LayerNorm with sqrt(d) scaling, whose scores are
    sqrt(d) times the cosines). Ratio LayerNorm / l2 per layer from layer 2 (paper) on (layers where l2 has
    no increase are left out).
    5a: the largest ratio (< 1 = weaker than l2 in every layer).
    "Simply changing the scaling factor from sqrt(d) to d recovers behavior similar to l2 normalization" has
    two readings, tested apart, since the d scaling can miss l2 from above (a much stronger pattern):
    5b, the shape: the key-order concordance of claim 2a of LayerNorm + d, the smallest over layers 2+
    (paper) (> 0.75 = it increases with the key as l2 does; l2's own in the note).
    5c, the size: |log ratio| of the advantages, the largest over layers 2+ (paper): < log 2 = within a factor
    of 2 of l2's, either way, in every layer. A ratio <= 0 (no increase at all) is not similar: the value is
    infinite and the p's test every layer's ratio against [1/2, 2] (intersection-union for, Bonferroni over
    the 2 x layers one-sided tests against).
    """
    rows = {"5a": [], "5b": [], "5c": []}
    for claim_ids, scale in ((("5a",), "sqrt_d"), (("5b", "5c"), "d")):
        variants = reference_d(
            select_variants(data.params, norm="layernorm", scale=scale, pe="none", mask="causal", residual=True)
        )
        for variant, p in variants.iterrows():
            partner = partner_variant(data.params, variant, norm="l2", scale="none")
            setting, label = f"{setting_label(p)} vs l2", f"α={p['alpha']:g}{law_suffix(p)}"
            depth = min(int(p["n_layers"]), int(data.params.loc[partner, "n_layers"])) if partner else 0
            if partner is None or depth < 2:
                why = (
                    f"variant {variant}: no l2 variant with the same alpha, d and seq_len"
                    if partner is None
                    else f"variant {variant}: fewer than 2 layers"
                )
                for claim_id in claim_ids:
                    rows[claim_id].append(row(claim_id, setting, None, th, note=why, label=label))
                continue
            ratios, kept, conc, conc_l2 = [], [], [], []
            for layer in range(1, depth):
                ln, l2 = data.sim_field(variant, layer), data.sim_field(partner, layer)
                a_ln = nearer_key_advantage(ln.x / diagonal_mean(ln.x, ln.size)[None, :], ln.size)
                a_l2 = nearer_key_advantage(l2.x / diagonal_mean(l2.x, l2.size)[None, :], l2.size)
                conc.append(concordance(ln.x, ln.size))
                conc_l2.append(concordance(l2.x, l2.size)[0])
                if a_l2[0] > 0:
                    ratios.append(safe_ratio(a_ln, a_l2))
                    kept.append(layer)
            if "5b" in claim_ids:
                conc = np.stack(conc)
                by_layer = ", ".join(
                    f"{paper_layer(layer)} {c:.3g} (l2 {c2:.3g})"
                    for layer, c, c2 in zip(range(1, depth), conc[:, 0], conc_l2)
                )
                rows["5b"].append(
                    row(
                        "5b",
                        setting,
                        conc.min(axis=0),
                        th,
                        note=f"{variant} vs {partner}; by layer: " + by_layer,
                        label=label,
                    )
                )
            size_ids = [c for c in claim_ids if c != "5b"]
            if not ratios:
                for claim_id in size_ids:
                    rows[claim_id].append(
                        row(
                            claim_id,
                            setting,
                            None,
                            th,
                            note=f"{variant} vs {partner}: l2 shows no increase in any layer from 2 (paper) on",
                            label=label,
                        )
                    )
                continue
            ratios = np.stack(ratios)
            by_layer = ", ".join(f"{paper_layer(layer)} {r:.3g}" for layer, r in zip(kept, ratios[:, 0]))
            note = f"{variant} vs {partner}; ratio by layer: {by_layer}"
            if claim_ids == ("5a",):
                rows["5a"].append(row("5a", setting, ratios.max(axis=0), th, note=note, label=label))
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                size = np.where(ratios > 0, np.abs(np.log(np.where(ratios > 0, ratios, 1.0))), np.inf).max(axis=0)
            if not np.isfinite(size[0]):
                # no log ratio to test: the ratio itself, every layer within [1/2, 2] (family.band_pvalues)
                bound = np.exp(th["size_log_ratio"])
                p_for, p_against = band_pvalues(ratios[:, 0], ratios[:, 1:].std(axis=1, ddof=1), 1 / bound, bound)
                rows["5c"].append(
                    row(
                        "5c",
                        setting,
                        (np.inf, np.nan),
                        th,
                        label=label,
                        p_value=p_for,
                        p_against=p_against,
                        note=note + "; no increase in some layer: not similar at "
                        f"any size (p's: every layer's ratio against [{1 / bound:.3g}, {bound:.3g}])",
                    )
                )
            else:
                size[~np.isfinite(size)] = np.nan
                rows["5c"].append(row("5c", setting, size, th, note=note, label=label))
        for claim_id in claim_ids:
            if not rows[claim_id]:
                rows[claim_id].append(
                    absent_row(claim_id, th, f"no LayerNorm variant with {scale} scaling, no PE, causal, residual")
                )
    return rows["5a"] + rows["5b"] + rows["5c"]


REGIONS = {  # triangles.region_deficits' names -> short names for the notes
    "key 0": "key 0",
    "keys 0-1": "keys 0-1",
    "first quarter of keys, queries past the first quarter": "first quarter, later queries",
    "first quarter of keys, all queries": "first quarter, all queries",
}
PAPER_FIGURES = {  # what the paper's own figures show of the left region (6b's notes), by alpha
    0.0: "the paper's Figure 4 (alpha = 0) shows the left brighter at layer 2 and darker at layer 4",
    0.5: "the paper's Figure 9 (alpha = 0.5) shows it darker at every layer",
}


def region_row(field: Field, variant: str, p, layer: int, th: dict) -> dict:
    """6b in one layer: every named region's deficit and one-sided p's; the row's p's are the largest of the
    regions' either way (every region must agree: an intersection-union test each way)."""
    found = {}
    for name, values in region_deficits(field.x, field.size).items():
        value, se = estimate(values)
        found[name] = (values, value, se, *one_sided(value, se, th["left_deficit"], "<"))
    p_value = intersection_union(v[3] for v in found.values())
    p_against = intersection_union(v[4] for v in found.values())
    # the value shown: the region nearest the threshold in standard errors (the weakest evidence)
    nearest = min(
        found, key=lambda n: abs(found[n][1]) / max(found[n][2], 1e-300) if np.isfinite(found[n][1]) else np.inf
    )
    parts = [
        f"{REGIONS[n]} {v[1]:+.3g} ± {v[2]:.2g} ({'darker' if v[1] < 0 else 'brighter'})" for n, v in found.items()
    ]
    note = f"variant {variant}; " + "; ".join(parts)
    alone = {verdict(v[3], v[4], th["family_alpha"]) for v in found.values()}  # each region alone, unadjusted
    if len(alone) > 1:
        note += (
            f"; the regions disagree (each alone, unadjusted: {', '.join(sorted(alone))}): the verdict "
            "depends on the region"
        )
    figure = PAPER_FIGURES.get(round(float(p["alpha"]), 9))
    if figure:
        note += f"; {figure}"
    return row(
        "6b",
        f"{setting_label(p)}, {paper_layer(layer)}",
        found[nearest][0],
        th,
        note=note,
        layer=layer,
        label=f"α={p['alpha']:g} L{layer + 1}{law_suffix(p)}",
        p_value=p_value,
        p_against=p_against,
    )


def claim6(data: LedgerInputs, th: dict) -> list[dict]:
    """RoPE with and without the causal mask (pe = rope, l2, no scaling, residual; reference d).

    6a (mask causal): the non-relative amplitude of claim 4a (sqrt of the bias-corrected share of the score
    variance not explained by i - j), weakest layer from layer 2 (paper) on: RoPE alone is relative, so
    anything here comes from the mask. Layer 1 (paper) is left out: RoPE does not act on i.i.d. isotropic
    inputs (Barbero et al. 2025), the scores are noise.
    6b (mask causal, per layer from 2 (paper) on): "the left portion of the attention maps appears darker than
    other regions" names no layer and no region, and the sign of the left-region deficit (the mean of the
    band-centred score over the region, divided by the SD of the off-diagonal scores so that settings
    compare; < 0 = darker than its diagonals) flips with the region. So it is measured in four named regions
    (triangles.region_deficits: key 0; keys 0-1; the first quarter of keys for queries past the first
    quarter; the first quarter of keys over all queries) and the verdict is robust only where all agree.
    Each region gives one-sided p's (deficit < 0 for, > 0 against); the row's p_value is the largest of the
    four (intersection-union: supported only if every region is resolved darker) and so is its p_against
    (not supported only if every region is resolved brighter); where they disagree neither is small, so the
    row is inconclusive. The value shown is the region nearest 0 in standard errors; every region is in the
    note, with what the paper's figure shows.
    6c (mask none; lower triangle, the pairs the causal variants have): the largest non-relative amplitude
    over layers 2+ (paper) must stay below the same threshold.
    6d (mask causal, layer 1 (paper)): "when the input is independent Gaussian noise, RoPE alone does not
    affect the inner products": at layer 1 any non-relative pattern must be at the Monte Carlo noise level.
    Layer 1's scores are noise around alpha, so a variance share (6a's metric) is no measure (noise over
    noise); instead triangles.noise_units_nonrelative: the sum of squares of the band-centred scores over what
    noise alone gives (each entry's variance over the replicates), bias-corrected and square-rooted: the RMS
    of the non-relative pattern in noise RMS (0 = none; < 1 = smaller than the noise). At alpha > 0 RoPE does
    rotate the shared component, a relative pattern, which this does not count. Where the entries share noise
    (alpha > 0: the shared component), band-centring removes part of it and the uncorrected ratio is below 1.
    6e (mask causal, >= 3 layers): "by the third layer, this relative pattern becomes even clearer": clarity =
    the share of the off-diagonal score variance that i - j explains (1 - the bias-corrected non-relative
    share), what a per-panel colour scale shows of the relative stripes; layer 3 (paper) over layer 2 (paper)
    > 1. Layer 4's share is in the note.
    """
    rows = {"6a": [], "6b": [], "6c": [], "6d": [], "6e": []}
    for mask, claim_ids in (("causal", ("6a", "6b", "6d", "6e")), ("none", ("6c",))):
        variants = reference_d(
            select_variants(data.params, norm="l2", scale="none", pe="rope", mask=mask, residual=True)
        )
        variants = variants[variants["n_layers"] >= 2] if len(variants) else variants
        for variant, p in variants.iterrows():
            fields = layers_from_2(data, variant, int(p["n_layers"]))
            amp = np.stack([amplitude(nonrelative_share(f.x, f.size)) for f in fields])
            by_layer = ", ".join(f"{v:.3g}" for v in amp[:, 0])
            setting = f"{setting_label(p)}, layers 2-{int(p['n_layers'])} (paper)"
            label = f"α={p['alpha']:g}{law_suffix(p)}"
            if mask == "causal":
                rows["6a"].append(
                    row(
                        "6a",
                        setting,
                        amp.min(axis=0),
                        th,
                        note=f"variant {variant}; by layer: " + by_layer,
                        label=label,
                    )
                )
                for layer, f in enumerate(fields, start=1):
                    rows["6b"].append(region_row(f, variant, p, layer, th))
                first = data.sim_field(variant, 0)
                units = noise_units_nonrelative(first.x, first.size)
                rows["6d"].append(
                    row(
                        "6d",
                        f"{setting_label(p)}, {paper_layer(0)}",
                        amplitude(units),
                        th,
                        layer=0,
                        note=f"variant {variant}; sum of squares over the noise's, uncorrected: {units[0]:.3g}",
                        label=label,
                    )
                )
                if len(fields) >= 2:
                    shares = [1.0 - debias(nonrelative_share(f.x, f.size)) for f in fields]
                    rows["6e"].append(
                        row(
                            "6e",
                            f"{setting_label(p)}, {paper_layer(2)} vs {paper_layer(1)}",
                            safe_ratio(shares[1], shares[0]),
                            th,
                            layer=2,
                            label=label,
                            note=f"variant {variant}; relative share by layer from 2 (paper): "
                            + ", ".join(f"{v[0]:.3g}" for v in shares),
                        )
                    )
            else:
                causal = partner_variant(data.params, variant, mask="causal")
                rows["6c"].append(
                    row(
                        "6c",
                        setting,
                        amp.max(axis=0),
                        th,
                        note=f"variant {variant}"
                        + (f" (causal twin {causal})" if causal else "")
                        + "; by layer: "
                        + by_layer,
                        label=label,
                    )
                )
        for claim_id in claim_ids:
            if not rows[claim_id]:
                need = ">= 3 layers" if claim_id == "6e" else ">= 2 layers"
                rows[claim_id].append(
                    absent_row(claim_id, th, f"no RoPE variant with mask = {mask} (l2, no scaling, residual, {need})")
                )
    return rows["6a"] + rows["6b"] + rows["6c"] + rows["6d"] + rows["6e"]
