"""Claims 7d-7j: the stages of Figure 3 in the trained NoPE model (Section 4.2), as the paper describes them.

Each stage is a Gram matrix of the model's intermediates (src/causalpos/tables.py FIGURE3_STAGES, (a) LN(X) to
(i) the next layer's QK^T/sqrt(d)), with a bootstrap over sequences through the groups table. Key 0 (and
position 0) is left out throughout: the attention sink, "a vivid line at the 0th column", which the paper
sets aside. The builder's docstring says why each metric measures the paper's sentence.
"""

from __future__ import annotations

from causalpos.analysis.claims.models import nope_models
from causalpos.analysis.claims.replicates import LedgerInputs, debias
from causalpos.analysis.claims.rows import absent_row, row
from causalpos.analysis.triangles import concordance, diagonal_concordance, key_share, off_to_diagonal_rms, safe_ratio
from causalpos.tables import FIGURE3_STAGES

STAGE_CLAIMS = ("7d", "7e", "7f", "7g", "7h", "7i", "7j")


def stage_name(stage: str) -> str:
    return f"({stage}) {FIGURE3_STAGES[stage][0]}"


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
    The stage is read at the layer the extraction recorded it under ((h) and (i) the next layer's).
    """
    models = nope_models(data)
    if not models:
        why = "no trained NoPE model (kind trained, name containing 'nope') in the tables"
        return [absent_row(claim_id, th, why) for claim_id in STAGE_CLAIMS]
    out = {claim_id: [] for claim_id in STAGE_CLAIMS}
    for model in models:
        fields = {stage: data.intermediate_field(model, stage) for stage in "abcdgh"}

        def add(claim_id, stages, compute, what, note=""):
            missing = [s for s in stages if fields[s][0] is None]
            if missing:
                out[claim_id].append(row(claim_id, f"{model} {what}", None, th, model=model, label=model,
                                         note=f"no stage {', '.join(missing)} intermediates for model {model}"))
                return
            field, layer = fields[stages[-1]]
            values, extra = compute(*[fields[s][0] for s in stages])
            source = fields[stages[0]][0].source
            out[claim_id].append(row(claim_id, f"{model} {what}, layer {layer + 1} (paper)", values, th,
                                     note="; ".join(filter(None, [source, extra, note])), layer=layer,
                                     model=model, label=model))

        def ratio_at(f):
            return off_to_diagonal_rms(f.x, f.size, 1)

        def gain(first, second):
            r1, r2 = ratio_at(first), ratio_at(second)
            return safe_ratio(r2, r1), f"off/diagonal RMS {r1[0]:.3g} -> {r2[0]:.3g}"

        add("7d", "a", lambda f: (ratio_at(f), ""), stage_name("a"))
        add("7e", "ab", gain, f"{stage_name('a')} -> {stage_name('b')}")
        add("7f", "c", lambda f: (diagonal_concordance(f.x, f.size, 1), ""), stage_name("c"))
        add("7g", "c", lambda f: (debias(key_share(f.x, f.size, 1)), ""), stage_name("c"))
        add("7h", "cd", gain, f"{stage_name('c')} -> {stage_name('d')}")
        for claim_id, stage in (("7i", "g"), ("7j", "h")):
            add(claim_id, stage, lambda f: (concordance(f.x, f.size, 1), ""), stage_name(stage))
    return [r for claim_id in STAGE_CLAIMS for r in out[claim_id]]
