"""Claims 7-8: the trained NoPE model (Section 4.2) and pretrained RoPE LLMs (Section 5.2).

Each builder takes the LedgerInputs and the thresholds and returns ledger rows; its docstring says why
its metric measures the claim. The first keys are treated one way in claims 7 and 8 (catalogue's docstring):
key 0 is the attention sink, left out of every value and verdict (keys and positions >= KEYS_FROM); the first
few keys 1..FIRST_KEYS belong to the pattern (8d measures them); claim 7's rows report each metric again with
the first k keys left out, k in KEY_SWEEP (columns SWEEP_COLUMNS), claim 8's report key 0 apart.
"""

from __future__ import annotations

import numpy as np

from causalpos.analysis.claims.replicates import Field, LedgerInputs, amplitude, debias, estimate
from causalpos.analysis.claims.rows import (
    BASE,
    absent_row,
    paper_layer,
    reference_d,
    row,
    select_variants,
    setting_label,
)
from causalpos.catalogue.models import PRETRAINED_KIND, TRAINED_KIND, is_nope
from causalpos.analysis.triangles import (
    FIRST_KEYS,
    band_statistics,
    by_columns,
    concordance,
    nearer_key_advantage,
    off_diagonal_std,
    query_share,
    safe_ratio,
    visible_window,
)

# Key 0 is the attention sink: "a vivid line at the 0th column" that the paper sets aside (Section 4.2), and
# alone it can decide an order statistic or make a non-relative pattern. Every value and verdict of claims 7
# and 8 is over the keys (and diagonal positions) >= KEYS_FROM.
SINK_KEY = 0
KEYS_FROM = SINK_KEY + 1
# Ours: past the bright band over keys 1-12 of the larger NoPE model (docs/models.md), a third of S = 50.
FAR_KEYS = 16
# Claim 7's sensitivity to the first keys: each metric with the first k keys left out: with the sink (0), the
# verdict's (KEYS_FROM), without Section 5.2's "first few keys" too (8d's keys 1..FIRST_KEYS), and from FAR_KEYS.
KEY_SWEEP = (0, KEYS_FROM, KEYS_FROM + FIRST_KEYS, FAR_KEYS)
MIN_POSITIONS = 3  # a key order needs a row with two keys: positions k, k + 1 and the query k + 2


def sweep_columns(k: int) -> tuple[str, str]:
    """The ledger's columns of a metric with the first k keys left out (keys >= k): value and uncertainty."""
    return f"value_keys_from{k}", f"uncertainty_keys_from{k}"


SWEEP_COLUMNS = [c for k in KEY_SWEEP if k != KEYS_FROM for c in sweep_columns(k)]


def key_sweep(metric, size: int) -> tuple[np.ndarray | None, dict]:
    """metric(k) -> [estimate, replicates...] over the keys >= k: its values at KEYS_FROM (None where the matrix
    is too small) and the sweep's other cuts as ledger columns (NaN where fewer than MIN_POSITIONS remain)."""

    def at(k):
        return metric(k) if size - k >= MIN_POSITIONS else None

    columns = {}
    for k in KEY_SWEEP:
        if k != KEYS_FROM:
            values = at(k)
            columns.update(zip(sweep_columns(k), estimate(values) if values is not None else (np.nan, np.nan)))
    return at(KEYS_FROM), columns


def nope_models(data: LedgerInputs) -> list[str]:
    """The trained NoPE models (catalogue.models.is_nope) of kind "trained" (or, without a kind, in the
    intermediates)."""
    models = [m for m in data.models(TRAINED_KIND) if is_nope(m)]
    if not models and data.intermediates is not None:
        models = sorted({str(m) for m in data.intermediates["model"].unique() if is_nope(str(m))})
    return models


def stage_concordance(field: Field, kmin: int = KEYS_FROM) -> np.ndarray:
    """7a's metric: the key-order concordance of one [S, S] quantity over the keys >= kmin (replicates kept)."""
    return concordance(field.x, field.size, kmin=kmin)


def standardised_advantage(field: Field, kmin: int = KEYS_FROM) -> np.ndarray:
    """7b's strength: the nearer-key advantage over keys >= kmin per SD of the off-diagonal entries."""
    return safe_ratio(nearer_key_advantage(field.x, field.size, kmin), off_diagonal_std(field.x, field.size, kmin))


def alpha0_variants(data: LedgerInputs):
    """The alpha = 0 simulations 7b compares with (l2, no scaling, no PE, causal, residual; reference d),
    with at least two layers; empty if there is none."""
    sims = reference_d(select_variants(data.params, alpha=0.0, **BASE))
    return sims[sims["n_layers"] >= 2] if len(sims) else sims


def alpha0_reference(data: LedgerInputs, size: int, layer: int) -> tuple[str, int, Field] | None:
    """(variant, its layer, its scores) for 7b: of the alpha = 0 variants the one whose seq_len is nearest
    `size`, at the depth `layer` (or its last layer if shallower); None without such a variant."""
    sims = alpha0_variants(data)
    if sims.empty:
        return None
    variant = min(sims.index, key=lambda v: (abs(int(sims.loc[v, "seq_len"]) - size), str(v)))
    sim_layer = min(layer, int(sims.loc[variant, "n_layers"]) - 1)
    return variant, sim_layer, data.sim_field(variant, sim_layer)


def claim7(data: LedgerInputs, th: dict) -> list[dict]:
    """The trained NoPE model (kind "trained", catalogue.models.is_nope), Figure 3's intermediates.

    Keys >= 1 throughout (KEYS_FROM): column 0 is the attention sink (a "vivid line at the 0th column", Section
    4.2), which the paper sets aside and which alone can decide an order statistic. Every row also gives its
    metric with the first k keys left out, k in KEY_SWEEP (columns SWEEP_COLUMNS; the verdict is on keys >= 1):
    a bright band over the first keys that does not depend on the query lowers a key order at k = 0 and 1 only.
    7a, stages (f) LN(O) and (i) the next layer's QK^T/sqrt(d): the key-order concordance of claim 2a (share
    of key pairs j < j' < i where the nearer key's Gram entry / score is higher).
    7b: strength relative to the alpha = 0 simulation (l2 / no scaling / no PE / causal / residual, reference
    d, layer 2 (paper)). The model's scores have an arbitrary scale, so strength is standardised: the
    nearer-key advantage divided by the SD of the off-diagonal scores (the spread a per-panel colour scale
    shows). Ratio model (i) / simulation > 1 = stronger; the sweep leaves the same keys out of both. Uncertainty:
    bootstrap of the model and Monte Carlo replicates of the simulation, independent.
    7c: "a much stronger, i-independent pattern in Q^(2)K^(2)T (i), which more closely resembles the alpha != 0
    case": the query share of claim 3a (the share of the off-diagonal variance of (i) that the key does not
    explain), keys >= 1, bias-corrected.
    """
    models = nope_models(data)
    rows_a, rows_b, rows_c = [], [], []
    sims = alpha0_variants(data)
    for model in models:
        for stage, what in (("f", "(f) LN(O)"), ("i", "(i) next layer's scores")):
            field, layer = data.intermediate_field(model, stage)
            if field is None:
                rows_a.append(
                    row(
                        "7a",
                        f"{model} {what}",
                        None,
                        th,
                        note=f"no stage {stage} intermediates for model {model}",
                        label=f"{model} ({stage})",
                        model=model,
                    )
                )
                continue
            values, sweep = key_sweep(lambda k, f=field: stage_concordance(f, k), field.size)
            rows_a.append(
                row(
                    "7a",
                    f"{model} {what}, layer {layer + 1} (paper)",
                    values,
                    th,
                    note=field.source,
                    layer=layer,
                    label=f"{model} ({stage})",
                    model=model,
                    df=field.df,
                    **sweep,
                )
            )
        field, layer = data.intermediate_field(model, "i")
        if field is None:
            rows_c.append(
                row("7c", f"{model} (i)", None, th, note="no stage i intermediates", label=model, model=model)
            )
        else:
            values, sweep = key_sweep(lambda k: debias(query_share(field.x, field.size, k)), field.size)
            rows_c.append(
                row(
                    "7c",
                    f"{model} (i), layer {layer + 1} (paper)",
                    values,
                    th,
                    note=field.source,
                    layer=layer,
                    label=model,
                    model=model,
                    df=field.df,
                    **sweep,
                )
            )
        if field is None or sims.empty:
            rows_b.append(
                row(
                    "7b",
                    f"{model} (i)",
                    None,
                    th,
                    note="no stage i intermediates" if field is None else "no alpha = 0 l2 variant",
                    label=model,
                    model=model,
                )
            )
            continue
        variant, sim_layer, sim = alpha0_reference(data, field.size, layer)  # the same depth as (i): 1 by default

        def gain(k):
            if sim.size - k < MIN_POSITIONS:
                return np.full(field.x.shape[1], np.nan)
            return safe_ratio(standardised_advantage(field, k), standardised_advantage(sim, k))

        values, sweep = key_sweep(gain, field.size)
        strength, reference = standardised_advantage(field), standardised_advantage(sim)
        rows_b.append(
            row(
                "7b",
                f"{model} (i), layer {layer + 1} (paper) vs {setting_label(sims.loc[variant])}, "
                f"{paper_layer(sim_layer)}",
                values,
                th,
                note=f"{field.source}; model {strength[0]:.3g}, simulation ({variant}) {reference[0]:.3g} "
                "nearer-key advantage per score SD",
                layer=layer,
                label=model,
                model=model,
                df=field.df,  # the model's groups: fewer than the simulation's sample-block groups
                **sweep,
            )
        )
    if not rows_a:
        why = "no trained NoPE model (kind trained, model nope) in the tables"
        rows_a.append(absent_row("7a", th, why))
        rows_b.append(absent_row("7b", th, why))
        rows_c.append(absent_row("7c", th, why))
    return rows_a + rows_b + rows_c


def layer_statistics(data: LedgerInputs, model: str):
    """(layer, its scores' Field, its band statistics [estimate, replicates...]) for each layer of a pretrained
    model, a layer at a time: claim 8's measures (triangles.band_statistics with extras), and claim 12's."""
    for layer in data.score_layers(model):
        field = data.score_field(model, layer)
        # a sliding-window layer (Gemma-3's, at S > its window) is measured over the bands it sees
        window = visible_window(field.x[:, 0], field.size)
        # column by column (a chunk of replicates at a time): the same numbers, a fraction of the memory
        yield layer, field, by_columns(lambda x: band_statistics(x, field.size, extras=True, window=window), field.x)


def later_layers_median(values: dict) -> np.ndarray | None:
    """The median over the layers from layer 2 (paper) on ("except for the first layer", Section 5.2) of
    {layer: [estimate, replicates...]}, replicate by replicate; None with no such layer."""
    later = [layer for layer in sorted(values) if layer >= 1]
    return np.median(np.stack([values[layer] for layer in later]), axis=0) if later else None


def claim8(data: LedgerInputs, th: dict) -> list[dict]:
    """Pretrained RoPE LLMs (kind "pretrained"), every layer.

    8a (per layer): the non-relative amplitude of claim 4a over the keys >= 1, bands recentred without key 0
    (so the attention-sink column cannot by itself make the pattern): the RMS of the scores' departure from a
    function of i - j, as a fraction of the RMS spread of the raw scores. Section 5.2 argues the pattern is
    not negligible because it spans about [-1, 1] next to raw scores of about [-10, 10], a ratio of 0.1: the
    threshold. Bias-corrected for sampling noise (with 64 sequences the noise floor is large). Extra columns:
    the same with key 0 (``value_with_sink``), the standardised left-region deficit over keys >= 1
    (``left_deficit``: < 0 the first keys are darker than their diagonals, > 0 brighter) and the paper's own
    measure of scale (``range_ratio``, 8c's per layer).
    8b (per model): the median of 8a over the layers from layer 2 (paper) on ("except for the first layer").
    8c (per model): the argument in the paper's terms, "the typical attention score of these models are in
    [-10^1, 10^1] scale ... and the non-relative patterns in [-1, 1] scale": the 1%-99% quantile range of the
    diagonal-normalised pattern over that of the raw scores (triangles.pattern_range_ratio, keys >= 1;
    Figure 5's colour scale uses those quantiles), bias-corrected; the median over layers 2+ (paper).
    8d (per layer): "this pattern non-uniformly emphasizes the first few keys": the mean diagonal-normalised
    score of keys 1-FIRST_KEYS (bands recentred without key 0) in score SDs (triangles.first_keys_emphasis):
    > 0 = the first few keys score above their diagonals. The attention-sink key 0 is reported apart
    (``sink_emphasis``), since a sink alone would make any first-keys statistic. The same first keys are the
    ones claim 7's sweep leaves out at k = KEYS_FROM + FIRST_KEYS (KEY_SWEEP).
    """
    rows_a, rows_b, rows_c, rows_d = [], [], [], []
    models = data.models(PRETRAINED_KIND)
    for model in models:
        layers = data.score_layers(model)
        prefix = f"{model} " if len(models) > 1 else ""
        if not layers:
            for claim_id, rows in (("8a", rows_a), ("8d", rows_d)):
                rows.append(
                    row(claim_id, model, None, th, note=f"no scores for model {model}", label=model, model=model)
                )
            continue
        amps, ranges = {}, {}
        for layer, field, stats in layer_statistics(data, model):
            amp, sink, deficit = amplitude(stats["share1"]), amplitude(stats["share0"]), stats["deficit1"]
            ranges[layer] = debias(stats["range1"])
            amps[layer] = amp
            value_sink, se_sink = estimate(sink)
            value_def, se_def = estimate(deficit)
            value_range, se_range = estimate(ranges[layer])
            common = dict(layer=layer, label=f"{prefix}L{layer + 1}", model=model, df=field.df)
            rows_a.append(
                row(
                    "8a",
                    f"{model}, {paper_layer(layer)}",
                    amp,
                    th,
                    note=field.source,
                    value_with_sink=value_sink,
                    uncertainty_with_sink=se_sink,
                    left_deficit=value_def,
                    left_deficit_uncertainty=se_def,
                    range_ratio=value_range,
                    range_ratio_uncertainty=se_range,
                    **common,
                )
            )
            value_key0, se_key0 = estimate(stats["sink0"])
            rows_d.append(
                row(
                    "8d",
                    f"{model}, {paper_layer(layer)}",
                    stats["first1"],
                    th,
                    note=f"{field.source}; keys 1-{FIRST_KEYS}; key 0: {value_key0:+.3g} ± {se_key0:.2g}",
                    sink_emphasis=value_key0,
                    sink_emphasis_uncertainty=se_key0,
                    **common,
                )
            )
        later = [layer for layer in layers if layer >= 1]
        if later:
            setting = f"{model}, layers 2-{max(layers) + 1} (paper)"
            rows_b.append(
                row(
                    "8b",
                    setting,
                    later_layers_median(amps),
                    th,
                    note=f"{len(later)} layers",
                    label=model,
                    model=model,
                    df=field.df,
                )
            )
            rows_c.append(
                row(
                    "8c",
                    setting,
                    later_layers_median(ranges),
                    th,
                    note=f"{len(later)} layers; by layer (from 2): "
                    + ", ".join(f"{ranges[layer][0]:.3g}" for layer in later),
                    label=model,
                    model=model,
                    df=field.df,
                )
            )
        else:
            rows_b.append(row("8b", model, None, th, note="only one layer", label=model, model=model))
            rows_c.append(row("8c", model, None, th, note="only one layer", label=model, model=model))
    if not rows_a:
        why = "no pretrained model (kind pretrained) in the scores table"
        for claim_id, rows in (("8a", rows_a), ("8b", rows_b), ("8c", rows_c), ("8d", rows_d)):
            rows.append(absent_row(claim_id, th, why))
    return rows_a + rows_b + rows_c + rows_d
