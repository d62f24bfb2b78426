"""Claims 7d-7n: the stages of Figure 3 in the trained NoPE model (Section 4.2), as the paper describes them,
and the later layers of Figure 8.

Each stage is a Gram matrix of the model's intermediates (src/causalpos/catalogue/tables.py FIGURE3_STAGES, (a) LN(X) to
(i) the next layer's QK^T/sqrt(d)), with a bootstrap over sequences through the groups table. Key 0 (and
position 0) is left out of every value and verdict (models.KEYS_FROM): the attention sink, "a vivid line at the
0th column", which the paper sets aside; every row also gives its metric with the first k keys and positions
left out, k in models.KEY_SWEEP. The builder's docstring says why each metric measures the paper's sentence.
"""

from __future__ import annotations

import numpy as np

from causalpos.analysis.claims.closed_forms import closed_form_series
from causalpos.analysis.claims.model_claims import KEYS_FROM, key_sweep, nope_models
from causalpos.analysis.claims.replicates import LedgerInputs, debias
from causalpos.analysis.claims.rows import absent_row, paper_layer, row
from causalpos.analysis.triangles import (
    band_centred_map,
    concordance,
    diagonal_and_off_correlation,
    diagonal_concordance,
    diagonal_curve_correlation,
    key_share,
    off_to_diagonal_rms,
    query_spread_ratio,
    safe_ratio,
)
from causalpos.catalogue.tables import FIGURE3_STAGES
from causalpos.tril import packed_index

STAGE_CLAIMS = ("7d", "7e", "7f", "7g", "7h", "7i", "7j", "7k", "7l", "7m", "7n")
A2_ALPHA = 0.0  # Section 4.2: (a) "corresponds to the case alpha = 0", so (c) is read against A.2 at alpha = 0


def stage_name(stage: str) -> str:
    return f"({stage}) {FIGURE3_STAGES[stage][0]}"


def squared_norm_curve(data: LedgerInputs, size: int) -> tuple[np.ndarray | None, str]:
    """h'(i)^2 of A.2 at A2_ALPHA (no residual) at the model positions 0 .. size - 1 that the theory table covers
    (0-based p = the paper's i - 1), and a note; None without that closed form."""
    if data.theory is None:
        return None, "no theory table"
    _, h_prime, _, theory_size = closed_form_series(data.theory, A2_ALPHA, False)
    covered = min(size, theory_size)
    if covered - KEYS_FROM < 2:
        return None, f"no closed form without residual at alpha = {A2_ALPHA:g} over >= 2 positions in the theory table"
    note = f"h'(i)^2 at alpha = {A2_ALPHA:g}"
    if covered < size:
        note += f"; positions {KEYS_FROM}-{covered - 1} only (the theory table's seq_len {theory_size} < {size})"
    return h_prime[:covered] ** 2, note


def curve_correlation(field, curve: np.ndarray, k: int) -> np.ndarray:
    """7l's metric: the Pearson r of the diagonal with `curve` (from position 0) over the positions >= k it covers."""
    if len(curve) - k < 2:
        return np.full(field.x.shape[1], np.nan)
    return diagonal_curve_correlation(field.x, curve[k:], k)


def claim7_stages(data: LedgerInputs, th: dict) -> list[dict]:
    """Figure 3's stages, each a measurable version of the paper's sentence about it (keys and positions >= 1).

    7d (a): "because most embeddings are nearly orthogonal to one another, their inner products after
    LayerNorm are close to zero except along the main diagonal (a). This corresponds to the case alpha = 0":
    the RMS off-diagonal entry over the RMS diagonal entry (triangles.off_to_diagonal_rms; for unit-norm rows
    a typical |cosine|, an effective alpha). Below 0.1 = nearer alpha = 0 than the paper's smallest alpha > 0.
    7e (a) -> (b): "the ratio of off-diagonal to diagonal values increases substantially" (W_Q, W_K act like
    a larger alpha): the same ratio at (b) over that at (a), > 2. In magnitude (RMS), since the sign of the
    off-diagonal entries is not the claim (the ratio of the means can change sign).
    7f (c): "the main diagonal values decrease with increasing i, j", which the paper explains by h'(i)
    decreasing strictly (A.2): the share of position pairs i < i' whose diagonal entry falls
    (triangles.diagonal_concordance), > 0.75 as for the key order.
    7g (c): "the off-diagonal values remain nearly uniform across positions", explained by "g'(i) is nearly
    independent of j": the share of the off-diagonal variance that changes with the key once the query is
    fixed (triangles.key_share, bias-corrected), < 0.1 as claim 1e on the closed form.
    7h (c) -> (d): "the ratio between the diagonal and off-diagonal elements is significantly increased ...
    analogous to the relationship between (a) and (b)": read as 7e (off-diagonal over diagonal, the effect
    of W_O like that of W_Q, W_K); (d)'s ratio over (c)'s, > 2. The literal reading (diagonal over
    off-diagonal) is the reciprocal: the note gives the ratio, so a value < 0.5 would support that one.
    7i (g): "passing through the feedforward network and applying the residual (g) appears to laterally
    invert the pattern": a left-right mirror turns "increasing in j" into "decreasing in j", so the key-order
    concordance of claim 2a at (g) must fall below 0.25 (the mirror of 0.75).
    7j (h): "a subsequent LayerNorm restores it": the concordance at (h) above 0.75 again.
    7k (d) -> (e): "After adding the residual (e), the trend is almost identical to (d)": the smaller of two
    Pearson correlations between (d) and (e), of their diagonals and of their off-diagonal entries
    (triangles.diagonal_and_off_correlation): both the diagonal's trend and the off-diagonal pattern must
    survive the residual; a shift or a scale (the residual's own, position-free Gram) changes neither.
    7l (c): "The diagonal corresponds to h(i)^2 with the residual term removed"; A.2 defines that quantity as
    h'(i)^2 = <x_i^(1), x_i^(1)>, the squared norm a Gram diagonal holds, and (a) "corresponds to the case
    alpha = 0": the Pearson correlation of (c)'s diagonal with h'(i)^2 at alpha = 0 (paper position i = p + 1),
    i.e. the shape up to a fitted scale and offset (the offset leaves room for a common part of the value
    vectors, the alpha > 0 floor of h'^2). 7f asks only that it falls; this asks that it falls as h'^2 does,
    steeply first and then flattening (a straight fall gives r = 0.69 at S = 50).
    7m (c): "g'(i) is ... only weakly dependent on i, explaining the uniformity of the off-diagonal elements"
    next to the falling diagonal: how much (c)'s off-diagonal rows change with i next to how much its diagonal
    does (triangles.query_spread_ratio: SD over queries of the row means over SD of the diagonal). Not the query
    share of 3a / 7c: g' is a function of i alone, so its query share is about 0.8 whatever its size; "weakly"
    is a size, and the paper's own comparison is the diagonal's. The note gives the closed forms' ratio, g'(i)
    over h'(i)^2 at alpha = 0 (0.385 at S = 50).
    7n, Figure 8 (every layer of the scores table after the (i) layer): the paper only shows the later layers'
    attention patterns, "drawn with a same manner to Figure 3", and says nothing of them. The authors' notebook
    draws Figure 8 diagonal-normalised, so our reading is of those maps: the non-relative increasing pattern
    goes on there, each row rising with the key once every diagonal's mean is taken out (the key-order
    concordance of the diagonal-normalised scores, bands recentred without the keys below the cut).
    The stage is read at the layer the extraction recorded it under ((h) and (i) the next layer's).
    """
    models = nope_models(data)
    if not models:
        why = "no trained NoPE model (kind trained, model nope) in the tables"
        return [absent_row(claim_id, th, why) for claim_id in STAGE_CLAIMS]
    out = {claim_id: [] for claim_id in STAGE_CLAIMS}
    for model in models:
        fields = {stage: data.intermediate_field(model, stage) for stage in "abcdeghi"}

        def add(claim_id, stages, compute, what, note=""):
            """compute(k, *fields) -> values over keys >= k, or (values, a note) at KEYS_FROM."""
            missing = [s for s in stages if fields[s][0] is None]
            if missing:
                out[claim_id].append(
                    row(
                        claim_id,
                        f"{model} {what}",
                        None,
                        th,
                        model=model,
                        label=model,
                        note=f"no stage {', '.join(missing)} intermediates for model {model}",
                    )
                )
                return
            field, layer = fields[stages[-1]]
            inputs = [fields[s][0] for s in stages]
            notes = []

            def metric(k):
                result = compute(k, *inputs)
                if isinstance(result, tuple):
                    result, extra = result
                    if k == KEYS_FROM:
                        notes.append(extra)
                return result

            values, sweep = key_sweep(metric, field.size)
            source = inputs[0].source
            out[claim_id].append(
                row(
                    claim_id,
                    f"{model} {what}, layer {layer + 1} (paper)",
                    values,
                    th,
                    note="; ".join(filter(None, [source, *notes, note])),
                    layer=layer,
                    model=model,
                    label=model,
                    df=field.df,
                    **sweep,
                )
            )

        def gain(k, first, second):
            r1, r2 = off_to_diagonal_rms(first.x, first.size, k), off_to_diagonal_rms(second.x, second.size, k)
            return safe_ratio(r2, r1), f"off/diagonal RMS {r1[0]:.3g} -> {r2[0]:.3g}"

        def similarity(k, d, e):
            r_diagonal, r_off = diagonal_and_off_correlation(d.x, e.x, d.size, k)
            return np.fmin(r_diagonal, r_off), f"r diagonal {r_diagonal[0]:.3g}, off-diagonal {r_off[0]:.3g}"

        add("7d", "a", lambda k, f: (off_to_diagonal_rms(f.x, f.size, k), ""), stage_name("a"))
        add("7e", "ab", gain, f"{stage_name('a')} -> {stage_name('b')}")
        add("7f", "c", lambda k, f: diagonal_concordance(f.x, f.size, k), stage_name("c"))
        add("7g", "c", lambda k, f: debias(key_share(f.x, f.size, k)), stage_name("c"))
        add("7h", "cd", gain, f"{stage_name('c')} -> {stage_name('d')}")
        for claim_id, stage in (("7i", "g"), ("7j", "h")):
            add(claim_id, stage, lambda k, f: concordance(f.x, f.size, k), stage_name(stage))
        add("7k", "de", similarity, f"{stage_name('d')} -> {stage_name('e')}")
        size = fields["c"][0].size if fields["c"][0] is not None else 0
        curve, curve_note = squared_norm_curve(data, size)
        if curve is None and fields["c"][0] is not None:
            out["7l"].append(
                row("7l", f"{model} {stage_name('c')}", None, th, note=curve_note, model=model, label=model)
            )
        else:
            add("7l", "c", lambda k, f: curve_correlation(f, curve, k), stage_name("c"), note=curve_note)
        add("7m", "c", lambda k, f: query_spread_ratio(f.x, f.size, k), stage_name("c"), note=closed_form_spread(data))
        later_layers(data, model, fields["i"][1], th, out["7n"])
    return [r for claim_id in STAGE_CLAIMS for r in out[claim_id]]


def closed_form_spread(data: LedgerInputs) -> str:
    """7m's yardstick in the note: the same ratio for the closed forms g'(i) (off-diagonal) and h'(i)^2
    (diagonal) at A2_ALPHA, from the theory table."""
    if data.theory is None:
        return ""
    positions, h_prime, g_prime, size = closed_form_series(data.theory, A2_ALPHA, False)
    if size - KEYS_FROM < 3:
        return ""
    gram = g_prime.copy()
    gram[packed_index(positions, positions)] = h_prime**2
    ratio = query_spread_ratio(gram[:, None], size, KEYS_FROM)[0]
    return f"closed forms g'(i) / h'(i)^2 at alpha = {A2_ALPHA:g}, S = {size}: {ratio:.3g}"


def later_layers(data: LedgerInputs, model: str, inner_layer: int | None, th: dict, rows: list) -> None:
    """7n: the key-order concordance (keys >= 1) of the diagonal-normalised scores of every layer of the model
    after the (i) layer (after layer 2 (paper) where the model has no stage (i))."""
    after = inner_layer if inner_layer is not None else 1
    layers = [layer for layer in data.score_layers(model) if layer > after]
    if not layers:
        rows.append(
            row(
                "7n",
                f"{model}, layers after {paper_layer(after)}",
                None,
                th,
                model=model,
                label=model,
                note=f"no scores of model {model} after {paper_layer(after)}",
            )
        )
    for layer in layers:
        field = data.score_field(model, layer)
        values, sweep = key_sweep(
            lambda k: concordance(band_centred_map(field.x, field.size, k), field.size, k), field.size
        )
        rows.append(
            row(
                "7n",
                f"{model}, {paper_layer(layer)}",
                values,
                th,
                note=field.source,
                layer=layer,
                model=model,
                label=f"{model} L{layer + 1}",
                df=field.df,
                **sweep,
            )
        )
