"""Claims 1-6: the parameter-free decoder (Sections 3, 4.1, 5.1; Appendices A, B, D), on the simulations.

Each builder takes the LedgerInputs and the thresholds and returns ledger rows; its docstring says why
its metric measures the claim.
"""

from __future__ import annotations

import numpy as np
from causalpos.analysis.claims.replicates import Field, LedgerInputs, amplitude, debias
from causalpos.analysis.claims.rows import BASE, absent_row, paper_layer, partner_variant, reference_d, row, select_variants, setting_label
from causalpos.analysis.triangles import antisymmetric_share, concordance, diagonal_mean, eq4_r2, left_deficit, mean_squared_gap, nearer_key_advantage, nonrelative_share, pack, query_share, safe_ratio

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
        why = "no theory table" if data.theory is None else \
            "no variant with norm=l2, scale=none, pe=none, mask=causal, residual=True and >= 2 layers"
        return [absent_row("1a", th, why), absent_row("1b", th, why)]
    theory = data.theory.assign(alpha=data.theory["alpha"].astype(float).round(9),
                                residual=data.theory["residual"].astype(bool))
    order = candidates.sort_values(["alpha", "d"]).index
    series = {}
    for variant in order:
        p = candidates.loc[variant]
        field = data.sim_field(variant, 1)
        cf_rows = theory[np.isclose(theory["alpha"], p["alpha"]) & theory["residual"]]
        cf_rows = cf_rows.drop_duplicates(["query_pos", "key_pos"])
        setting = setting_label(p)
        if cf_rows.empty or field is None:
            rows_a.append(row("1a", setting, None, th, note=f"variant {variant}: theory table has no "
                               f"alpha = {p['alpha']:g} with residual", label=f"α={p['alpha']:g}, d={int(p['d'])}"))
            continue
        (cf,) = pack(cf_rows, ["score"], field.size)
        if np.isnan(cf).any():
            rows_a.append(row("1a", setting, None, th, note=f"variant {variant}: theory table does not cover "
                               f"seq_len {field.size}", label=f"α={p['alpha']:g}, d={int(p['d'])}"))
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
            rows_b.append(row("1b", setting, None, th, note=note + "; fewer than 2 resolved gaps",
                               label=f"α={alpha:g}"))
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
    (paper), for each later layer: > 1 = the increasing pattern is stronger there.
    """
    rows_a, rows_b = [], []
    variants = reference_d(select_variants(data.params, **BASE))
    variants = variants[variants["n_layers"] >= 2] if len(variants) else variants
    for variant, p in variants.iterrows():
        field = data.sim_field(variant, 1)
        rows_a.append(row("2a", setting_label(p), concordance(field.x, field.size), th, note=f"variant {variant}",
                           layer=1, label=f"α={p['alpha']:g}"))
    if not rows_a:
        rows_a.append(absent_row("2a", th, "no l2 / no scaling / no PE / causal / residual variant with >= 2 layers"))
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
            rows_b.append(row("2b", f"{setting_label(p)}, {paper_layer(layer)}", ratio, th, note=note, layer=layer,
                               label=f"L{layer + 1}"))
    if not rows_b:
        rows_b.append(absent_row("2b", th, "no alpha = 0 l2 variant with >= 3 layers"))
    return rows_a + rows_b


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
    """
    rows_a, rows_b = [], []
    variants = reference_d(select_variants(data.params, **BASE))
    variants = variants[(variants["n_layers"] >= 2) & (variants["alpha"].astype(float) > 0)] if len(variants) \
        else variants
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
        rows_a.append(row("3a", setting_label(p), debias(query_share(field.x, field.size)), th, note=note_a, layer=1,
                           label=f"α={p['alpha']:g}"))
        if zero is None:
            rows_b.append(row("3b", setting_label(p), None, th, note=note + "; no α=0 variant with the other "
                               "parameters equal", label=f"α={p['alpha']:g}"))
            continue
        z_field = data.sim_field(zero, 1)
        ratio = safe_ratio(nearer_key_advantage(field.x, field.size), nearer_key_advantage(z_field.x, z_field.size))
        rows_b.append(row("3b", setting_label(p), ratio, th, note=f"{note} against {zero}", layer=1,
                           label=f"α={p['alpha']:g}"))
    if not rows_a:
        why = "no l2 / no scaling / no PE / causal / residual variant with alpha > 0"
        rows_a.append(absent_row("3a", th, why))
        rows_b.append(absent_row("3b", th, why))
    return rows_a + rows_b


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
        rows_a.append(row("4a", f"{setting_label(p)}, layers 2-{int(p['n_layers'])} (paper)", nonrel.min(axis=0), th,
                           note=f"variant {variant}; weakest at {paper_layer(weakest)}; by layer: "
                           + ", ".join(f"{v:.3g}" for v in nonrel[:, 0]), label=f"α={p['alpha']:g}"))
        weakest = int(np.argmin(anti[:, 0])) + 1
        rows_b.append(row("4b", f"{setting_label(p)}, layers 2-{int(p['n_layers'])} (paper)", anti.min(axis=0), th,
                           note=f"variant {variant}; weakest at {paper_layer(weakest)}; by layer: "
                           + ", ".join(f"{v:.3g}" for v in anti[:, 0]), label=f"α={p['alpha']:g}"))
    if not rows_a:
        why = "no l2 / no scaling / no PE / causal / residual variant with >= 2 layers"
        rows_a.append(absent_row("4a", th, why))
        rows_b.append(absent_row("4b", th, why))
    return rows_a + rows_b


def claim5(data: LedgerInputs, th: dict) -> list[dict]:
    """LayerNorm against l2 (Appendix B): each LayerNorm / no PE / causal / residual variant with sqrt_d (5a)
    or d (5b) scaling, paired with the l2 / no scaling variant of the same alpha, d and length.

    Strength = the nearer-key advantage (mean over key pairs j < j' < i of s(i, j') - s(i, j)) in cosine
    units: each layer's scores divided by the mean of its diagonal (a token's score with itself: 1 for l2
    and for LayerNorm with d scaling, sqrt(d) for LayerNorm with sqrt(d) scaling, whose scores are
    sqrt(d) times the cosines). Ratio LayerNorm / l2 per layer from layer 2 (paper) on (layers where l2 has
    no increase are left out).
    5a: the largest ratio (< 1 = weaker than l2 in every layer). 5b: the smallest ratio (> 0.5 = the d
    scaling keeps at least half of l2's strength in every layer). The note gives every layer's ratio,
    since "l2-like" can also be missed from above (a much stronger pattern than l2's).
    """
    rows = {"5a": [], "5b": []}
    for claim_id, scale, pick in (("5a", "sqrt_d", np.max), ("5b", "d", np.min)):
        variants = reference_d(select_variants(data.params, norm="layernorm", scale=scale, pe="none", mask="causal",
                                        residual=True))
        for variant, p in variants.iterrows():
            partner = partner_variant(data.params, variant, norm="l2", scale="none")
            setting = f"{setting_label(p)} vs l2"
            depth = min(int(p["n_layers"]), int(data.params.loc[partner, "n_layers"])) if partner else 0
            if partner is None or depth < 2:
                rows[claim_id].append(row(claim_id, setting, None, th, note=f"variant {variant}: no l2 variant "
                                           "with the same alpha, d and seq_len" if partner is None
                                           else f"variant {variant}: fewer than 2 layers",
                                           label=f"α={p['alpha']:g}"))
                continue
            ratios, kept = [], []
            for layer in range(1, depth):
                ln, l2 = data.sim_field(variant, layer), data.sim_field(partner, layer)
                a_ln = nearer_key_advantage(ln.x / diagonal_mean(ln.x, ln.size)[None, :], ln.size)
                a_l2 = nearer_key_advantage(l2.x / diagonal_mean(l2.x, l2.size)[None, :], l2.size)
                if a_l2[0] > 0:
                    ratios.append(safe_ratio(a_ln, a_l2))
                    kept.append(layer)
            if not ratios:
                rows[claim_id].append(row(claim_id, setting, None, th, note=f"{variant} vs {partner}: l2 shows no "
                                           "increase in any layer from 2 (paper) on", label=f"α={p['alpha']:g}"))
                continue
            ratios = np.stack(ratios)
            by_layer = ", ".join(f"{paper_layer(layer)} {r:.3g}" for layer, r in zip(kept, ratios[:, 0]))
            rows[claim_id].append(row(claim_id, setting, pick(ratios, axis=0), th,
                                       note=f"{variant} vs {partner}; by layer: {by_layer}",
                                       label=f"α={p['alpha']:g}"))
        if not rows[claim_id]:
            rows[claim_id].append(absent_row(claim_id, th, f"no LayerNorm variant with {scale} scaling, no PE, causal, "
                                          "residual"))
    return rows["5a"] + rows["5b"]


def claim6(data: LedgerInputs, th: dict) -> list[dict]:
    """RoPE with and without the causal mask (pe = rope, l2, no scaling, residual; reference d).

    6a (mask causal): the non-relative amplitude of claim 4a (sqrt of the bias-corrected share of the score
    variance not explained by i - j), weakest layer from layer 2 (paper) on: RoPE alone is relative, so
    anything here comes from the mask. Layer 1 (paper) is left out: RoPE does not act on i.i.d. isotropic
    inputs (Barbero et al. 2025), the scores are noise.
    6b (mask causal, per layer from 2 (paper) on): the left-region deficit of summary.nonrelativeness (mean of
    the band-centred score over the keys j < max(2, ceil(S/4))), divided by the SD of the off-diagonal scores
    so that settings compare: < 0 = the left region is darker than its diagonals. A sign claim.
    6c (mask none; lower triangle, the pairs the causal variants have): the largest non-relative amplitude
    over layers 2+ (paper) must stay below the same threshold.
    """
    rows = {"6a": [], "6b": [], "6c": []}
    for mask, claim_ids in (("causal", ("6a", "6b")), ("none", ("6c",))):
        variants = reference_d(select_variants(data.params, norm="l2", scale="none", pe="rope", mask=mask, residual=True))
        variants = variants[variants["n_layers"] >= 2] if len(variants) else variants
        for variant, p in variants.iterrows():
            fields = layers_from_2(data, variant, int(p["n_layers"]))
            amp = np.stack([amplitude(nonrelative_share(f.x, f.size)) for f in fields])
            by_layer = ", ".join(f"{v:.3g}" for v in amp[:, 0])
            setting = f"{setting_label(p)}, layers 2-{int(p['n_layers'])} (paper)"
            if mask == "causal":
                rows["6a"].append(row("6a", setting, amp.min(axis=0), th, note=f"variant {variant}; by layer: "
                                       + by_layer, label=f"α={p['alpha']:g}"))
                for layer, f in enumerate(fields, start=1):
                    rows["6b"].append(row("6b", f"{setting_label(p)}, {paper_layer(layer)}", left_deficit(f.x, f.size), th,
                                           note=f"variant {variant}", layer=layer,
                                           label=f"α={p['alpha']:g} L{layer + 1}"))
            else:
                causal = partner_variant(data.params, variant, mask="causal")
                rows["6c"].append(row("6c", setting, amp.max(axis=0), th,
                                       note=f"variant {variant}" + (f" (causal twin {causal})" if causal else "")
                                       + "; by layer: " + by_layer, label=f"α={p['alpha']:g}"))
        for claim_id in claim_ids:
            if not rows[claim_id]:
                rows[claim_id].append(absent_row(claim_id, th, f"no RoPE variant with mask = {mask} (l2, no scaling, "
                                              "residual, >= 2 layers)"))
    return rows["6a"] + rows["6b"] + rows["6c"]
