"""The claims ledger's catalogue: every claim of the paper as a measured number, its uncertainty and a verdict.

`build_ledger(simulations, theory, scores, intermediates, groups)` reads the tables of the other stages
(long format, lower triangle with the diagonal, 0-based layers and positions) and returns one row per
claim and setting: the columns LEDGER_COLUMNS (``claim_id, section, statement, setting, metric, value,
uncertainty, threshold, verdict``), then EXTRA_COLUMNS (the one-sided ``p_value`` and ``p_against`` and their
Holm-adjusted ``p_adjusted`` and ``p_against_adjusted`` (see Verdict), ``exact`` (a value without sampling
error: a closed form or a symbolic check), ``claim`` 1-11, a short ``title``, the
``direction`` of the threshold, ``unit``, the family-wise ``alpha``, ``model``, ``layer`` (0-based), a short
``label`` for plots, a ``note`` naming the variants or the source of the uncertainty; for claim 8a the
amplitude with the attention-sink key 0, the left-region deficit and the range ratio of claim 8c; for 8d
the emphasis of key 0 (``sink_emphasis``); for claim 7 its metric with the first k keys left out
(``value_keys_from{k}``, ``uncertainty_keys_from{k}``, k in model_claims.KEY_SWEEP but 1, see First keys); for 9a the
claim compared and both laws' values and verdicts).
`ledger_markdown(ledger)` renders it for results/summary/claims.md; `plot_ledger(ledger, page, options)` draws
one page of the claims figure, one panel per claim (PAGES: which claims each page shows).

Claims (issues 6 and 12). CLAIMS holds one Claim per claim, in the ledger's order: where the paper states
it, its statement, the metric measured, the metric's unit, the direction and name of its threshold, a short
title; TOPICS says what each claim number is about and which page of the claims figure shows it. Each
builder's docstring says why its metric measures the claim: simulation_claims.py (1a-1b, 2-6; 2d-2e and 3d in
later_layers.py), closed_forms.py
(1c-1f; 1g-1h in appendix_errata.py), model_claims.py (7a-7c, 8), figure3_claims.py (7d-7n), robustness.py (9a), large_d.py
(10a-10c: ours, the large-d recursion against Monte Carlo at every layer; issue 25), ablation_claims.py (11a:
ours, the pattern ablation's loss gaps over training seeds; issue 27).
Layers are 0-based in the data; statements and settings say "layer L (paper)" = 1-based.

Uncertainty. Every metric is computed on the point estimate and on `n_bootstrap` replicates of its
input matrices (seeded numpy Generators, derived from `seed` and the setting's parameters, so adding a
setting does not change the others):

- Monte Carlo tables: a bootstrap over groups of sample blocks through the simulation_groups tables (the
  engine's score sums over 32 runs of consecutive seeded blocks; whole groups drawn with replacement), so a
  metric's spread covers the correlation between the entries of one sample. Without that table: parametric
  replicates score_mean + score_sem * N(0, 1), entry by entry, which treat the entries as independent and so
  understate the standard error of a metric over many entries.
- trained and pretrained models: a bootstrap over sequences through the `groups` table (whole groups
  of sequences drawn with replacement, G draws; replicate mean = sum of the drawn groups' sums / sum of
  their n), one set of draws per model shared by all its layers and stages. Without a groups table the
  scores fall back to parametric replicates from score_sem, and intermediates have no uncertainty.
- closed forms (1c-1e) and Appendix A's printed algebra against sympy (1g-1h): exact, uncertainty 0.

``uncertainty`` is the standard deviation of the metric over the replicates (one standard error).
Variance-share metrics (R², non-relative, antisymmetric, query and key shares, 6d's noise units, 8c's
range ratio) are biased upwards by sampling noise (noise adds variance to the band-centred scores even
of an exactly relative matrix, the "noise floor" of summary.nonrelativeness); their value is bootstrap
bias-corrected: value = estimate - (mean of the replicates - estimate), since each replicate adds the
same amount of noise once more. Concordances and advantages are reported as estimated.

Verdict (THRESHOLDS["family_alpha"] = 0.05; family.py). Each row tests its claim one-sided: ``p_value`` = P(an
estimate at least this far on the claim's side | the true value = the threshold), from z = (value - threshold) /
uncertainty referred to the normal (simulations) or to Student's t with G - 1 degrees of freedom (trained and
pretrained models: a bootstrap over G groups of sequences; 11a: t over training seeds), and
``p_against`` the same for the other side (evidence that the claim fails). Holm's step-down adjustment over the
ledger's family (every row with finite p's that is not exact, of the paper's claims in the paper's scope; the rows
on our own settings, thresholds or readings, catalogue.readings.OUR_READINGS, are a family apart, and our own claims
10 and 11 a family each, so they leave the paper's verdicts as they are) gives
``p_adjusted`` and ``p_against_adjusted``: a row is *supported* when p_adjusted <= alpha,
*not supported* when p_against_adjusted <= alpha, else *inconclusive*. Guarantee: over the m rows of the
family, the chance of any false "supported" verdict is at most alpha, and, separately, the chance of any false
"not supported" verdict is at most alpha (Holm: strong control of the family-wise error rate, under any
dependence between the rows; as exact as the p's, which rest on the normal approximation). Exact rows
(``exact``: closed forms, symbolic checks, uncertainty 0 by construction) have p 0 or 1 and are not counted in
m; an estimate whose replicates happen not to vary (uncertainty 0, e.g. a concordance of 1 in every replicate)
is not exact and is counted, with the smallest p its bootstrap can give, 1 / (R + 1) for R replicates. Each row
says its kind and reference (``row_kind``, ``reference``, ``ours``: catalogue.readings). A missing setting, a NaN value or a missing uncertainty gives NaN p's and
*inconclusive* with a note. Claims of several sub-tests give one p each way, stated in their builders: 2c
(every step of every row: the largest step's p for, the Bonferroni p of the strongest decrease against) and 6b
(every named region must agree: the largest region's p either way). Rows that are not tests (9a, which
compares two verdicts; a property that holds *by construction*) have NaN p's, stay outside the family and keep
their verdict. The official-law / exact-law twin rows that 9a compares are adjusted in a family of their own
first. Verdicts depend only on the data and the thresholds, never on the paper.

First keys (claims 7 and 8, one rule; model_claims.SINK_KEY, KEYS_FROM, KEY_SWEEP, triangles.FIRST_KEYS). Key 0 is
the attention sink ("a vivid line at the 0th column", Section 4.2, which the paper sets aside): every value and
verdict of claims 7 and 8 is over the keys (and diagonal positions) >= 1, and claim 8 reports key 0 apart
(``value_with_sink``, ``sink_emphasis``). The first few keys, 1-4 (Section 5.2's "first few keys"), belong to the
pattern: they count in every verdict, and 8d measures their emphasis. Since a bright band over them can also
decide a key order (7a, 7b) against the paper, every claim-7 row reports its metric again with the first k keys
left out, k = 0 (with the sink), 5 (without the sink and the first few keys: 8d's keys) and 16 (ours: past the
band over keys 1-12 of the larger NoPE model); the verdict stays on k = 1.

Input law: the simulation tables' ``sampler`` column ("official": the paper's construction, Section 4.1, as
in the authors' notebooks, the default; "exact_full", "exact_reduced": our exact-moment law, the robustness
check; no column: the paper's). The claims are measured on the paper's construction; an exact-law variant
with an official-law twin (same parameters) enters only claim 9a, one without a twin is a setting of its own
("exact law" in its setting).
"""

from __future__ import annotations

from dataclasses import dataclass

from causalpos.catalogue.preregistered import REGISTRATIONS
from causalpos.catalogue.records import Claim, claim_number  # noqa: F401  (the ledger's record of a claim)
from causalpos.catalogue.tables import EXTRA_COLUMNS, LEDGER_COLUMNS  # noqa: F401  (the ledger's columns: its Table)
from causalpos.catalogue.thresholds import REMOVED_THRESHOLDS, THRESHOLDS, merge_thresholds  # noqa: F401

VERDICTS = ("supported", "not supported", "inconclusive", "by construction")


CLAIMS = {
    claim.id: claim
    for claim in (
        Claim(
            "1a",
            title="Eq. 4 matches Monte Carlo",
            section="3.2 (Eq. 4), 4.1",
            statement="Eq. 4: the layer-2 (paper) score of the parameter-free l2 decoder is g(i)/(h(i)h(j)); Monte "
            "Carlo agrees with the closed form",
            metric="R² of Monte Carlo on Eq. 4, off-diagonal pairs, layer 2 (paper)",
            unit="R²",
            direction=">",
            threshold="eq4_r2",
            measured_by="causalpos.analysis.claims.simulation_claims.claim1",
        ),
        Claim(
            "1b",
            title="Monte Carlo gap shrinks with d",
            section="3.2 (Eq. 4)",
            statement="The gap between Monte Carlo and Eq. 4 shrinks as d grows",
            metric="slope of log RMS gap against log d",
            unit="log-log slope",
            direction="<",
            threshold="gap_slope",
            measured_by="causalpos.analysis.claims.simulation_claims.claim1",
        ),
        Claim(
            "1c",
            title="h strictly decreasing (A.1)",
            section="3.2, App. A.1",
            statement='"h(j) is strictly decreasing on j" (closed form, with residual)',
            metric="largest relative step (h(i+1) - h(i)) / h(i) over i, closed form",
            unit="relative step",
            direction="<",
            threshold="strict_step",
            measured_by="causalpos.analysis.claims.closed_forms.claim1_appendix",
        ),
        Claim(
            "1d",
            title="h' strictly decreasing (A.2)",
            section="4.2, App. A.2",
            statement='"h\'(i) decreases strictly with i" (closed form, without residual)',
            metric="largest relative step (h'(i+1) - h'(i)) / h'(i) over i, closed form",
            unit="relative step",
            direction="<",
            threshold="strict_step",
            measured_by="causalpos.analysis.claims.closed_forms.claim1_appendix",
        ),
        Claim(
            "1e",
            title="g' has no j (by construction)",
            section="4.2, App. A.2",
            statement='"g\'(i) is nearly independent of j" (closed form, without residual): true by construction, '
            "the formula for g'(i) contains no j; the row records that property of the formula, not a "
            "finding",
            metric="share of the off-diagonal variance of the closed form g' that changes with the key at fixed "
            "query (0 by construction)",
            unit="variance share",
            direction="<",
            threshold="key_share",
            measured_by="causalpos.analysis.claims.closed_forms.claim1_appendix",
        ),
        Claim(
            "1f",
            title="no residual: nearer keys higher",
            section="App. A.2",
            statement="Without residual too the layer-2 (paper) score increases with the key position (h' strictly "
            "decreasing, Monte Carlo)",
            metric="key-order concordance at layer 2 (paper), no residual",
            unit="share of key pairs",
            direction=">",
            threshold="concordance",
            measured_by="causalpos.analysis.claims.closed_forms.claim1_appendix",
        ),
        Claim(
            "1g",
            title="A.1's printed polynomial (erratum)",
            section="App. A.1",
            statement='A.1 prints h(j+1)^2 - h(j)^2 as "((alpha-1)e^{4alpha} + 2(alpha-1)e^{3alpha+1})j^2 + '
            "((2alpha-6)e^{alpha+3} + 2(alpha-1)e^{3alpha+1} + (alpha-1)e^{4alpha})j + (2alpha-4)e^{alpha+3} "
            '+ (-2alpha+4)e^{2alpha+2}" over (e + je^alpha)^2 (e + (j-1)e^alpha)^2 and concludes from '
            "its sign that h is strictly decreasing",
            metric="largest relative difference |printed - true| / |true| over alphas and positions (true: sympy "
            "from the definitions)",
            unit="relative difference",
            direction="<",
            threshold="printed_exact",
            measured_by="causalpos.analysis.claims.closed_forms.claim1_appendix",
        ),
        Claim(
            "1h",
            title="A.2's printed h'^2 step (erratum)",
            section="App. A.2",
            statement="A.2 prints h'(i+1)^2 - h'(i)^2 = \"(alpha-1)e^alpha(2e^3 - 2e^{2+alpha}(i-1) + "
            "e^{3alpha}i(i-1)) / ((e + ie^alpha)^2 (e + (i-1)e^alpha)^2) < 0\" and concludes that h' is "
            "strictly decreasing",
            metric="largest relative difference |printed - true| / |true| over alphas and positions (true: sympy "
            "from the definitions)",
            unit="relative difference",
            direction="<",
            threshold="printed_exact",
            measured_by="causalpos.analysis.claims.closed_forms.claim1_appendix",
        ),
        Claim(
            "2a",
            title="layer 2: nearer keys score higher",
            section="3.2, 4.1",
            statement="h is strictly decreasing, so for a fixed query the layer-2 (paper) score increases with the "
            "key position (nearer keys score higher)",
            metric="key-order concordance at layer 2 (paper)",
            unit="share of key pairs",
            direction=">",
            threshold="concordance",
            measured_by="causalpos.analysis.claims.simulation_claims.claim2",
        ),
        Claim(
            "2b",
            title="stronger in layers 3, 4",
            section="4.1",
            statement='"By layers three and four, the pattern becomes more pronounced" (alpha = 0)',
            metric="nearer-key advantage relative to layer 2 (paper)",
            unit="ratio",
            direction=">",
            threshold="layer_growth",
            measured_by="causalpos.analysis.claims.simulation_claims.claim2",
        ),
        Claim(
            "2c",
            title="strictly increasing rows",
            section="4.1",
            statement='"... and also strictly increasing for j <= i with fixed i" (every layer from 2 (paper) on)',
            metric="share of rows resolved increasing with no resolved decrease (family-wise test)",
            unit="share of rows",
            direction=">=",
            threshold="strict_rows",
            measured_by="causalpos.analysis.claims.simulation_claims.claim2",
        ),
        Claim(
            "2d",
            title="Figure 1 (d) prints Eq. 4",
            section="3.2 (Fig. 1, Eq. 4)",
            statement="Figure 1 (d) prints the layer-2 (paper) scores at alpha = 0 of queries and keys 0-2 as 0.154, "
            "0.132, 0.150 (the authors' notebook that draws it): Eq. 4's g(i)/(h(i)h(j)) to the printed "
            "digits",
            metric="largest |printed - Eq. 4| over the printed entries (exact)",
            unit="score",
            direction="<",
            threshold="figure_digits",
            measured_by="causalpos.analysis.claims.later_layers.claim2_figure1_cosine",
        ),
        Claim(
            "2e",
            title="closer pairs more cosine-similar (Zuo)",
            section="4.1",
            statement='The pattern "aligns with Figure 1 in Zuo et al. (2025) ...: cosine similarity between hidden '
            'states ... is higher for closer i, j pairs", "since cosine similarity is equivalent to the '
            "inner product after l2 normalization\" (the paper's equivalence; checked in the simulation, "
            "alpha = 0, every layer from 2 (paper) on)",
            metric="key-order concordance at a fixed query and query-order concordance at a fixed key, the smaller",
            unit="share of pairs",
            direction=">",
            threshold="concordance",
            measured_by="causalpos.analysis.claims.later_layers.claim2_figure1_cosine",
        ),
        Claim(
            "3a",
            title="α > 0: layer 2 independent of the query",
            section="4.1, App. B",
            statement="With alpha > 0 the pattern saturates: at layer 2 (paper) it is nearly independent of the "
            "query position",
            metric="share of layer-2 (paper) score variance that depends on the query at fixed key",
            unit="variance share",
            direction="<",
            threshold="query_share",
            measured_by="causalpos.analysis.claims.simulation_claims.claim3",
        ),
        Claim(
            "3b",
            title="α > 0: clearer at layer 2 than α = 0",
            section="4.1, App. B",
            statement="With alpha > 0 the pattern appears faster: clearer at layer 2 (paper) than at alpha = 0",
            metric="layer-2 (paper) nearer-key advantage relative to alpha = 0",
            unit="ratio",
            direction=">",
            threshold="alpha_gain",
            measured_by="causalpos.analysis.claims.simulation_claims.claim3",
        ),
        Claim(
            "3c",
            title="higher α saturates faster in j",
            section="App. B",
            statement='"With higher alpha value, the pattern faster saturate rapidly to a constant on j" (Fig. 6)',
            metric="unsaturated share at the higher alpha over that at the lower, largest over layers 2+ (paper)",
            unit="ratio",
            direction="<",
            threshold="saturation_ratio",
            measured_by="causalpos.analysis.claims.simulation_claims.claim3",
        ),
        Claim(
            "3d",
            title="α > 0: saturation grows with the layer",
            section="4.1",
            statement='"The same saturation is more evident in the later layers" (alpha > 0); in i (the sentence\'s '
            "context, 3a's metric) or in j (Appendix B's, 3c's): both readings ours",
            metric="saturation metric (query share; unsaturated share) at layer L over layer 2 (paper), largest over "
            "L >= 3",
            unit="ratio",
            direction="<",
            threshold="layer_saturation",
            measured_by="causalpos.analysis.claims.later_layers.claim3_by_layer",
        ),
        Claim(
            "4a",
            title="bands not uniform (not relative)",
            section="4.1",
            statement="Within each diagonal band the scores are not uniform, unlike a relative encoding (every layer "
            "from 2 (paper) on)",
            metric="non-relative amplitude, weakest layer from layer 2 (paper) on",
            unit="fraction of score RMS",
            direction=">",
            threshold="nonrelative",
            measured_by="causalpos.analysis.claims.simulation_claims.claim4",
        ),
        Claim(
            "4b",
            title="not anti-diagonal symmetric (not absolute)",
            section="4.1",
            statement="The map is not symmetric about the anti-diagonal, unlike absolute encodings (Wang and Chen "
            "2020) (every layer from 2 (paper) on)",
            metric="anti-diagonal antisymmetric amplitude, weakest layer from layer 2 (paper) on",
            unit="fraction of score RMS",
            direction=">",
            threshold="asymmetry",
            measured_by="causalpos.analysis.claims.simulation_claims.claim4",
        ),
        Claim(
            "5a",
            title="LayerNorm + √d weakens the pattern",
            section="App. B",
            statement="LayerNorm with sqrt(d) scaling weakens the pattern relative to l2",
            metric="nearer-key advantage (cosine units) relative to l2, largest over layers 2+ (paper)",
            unit="ratio",
            direction="<",
            threshold="sqrt_d_ratio",
            measured_by="causalpos.analysis.claims.simulation_claims.claim5",
        ),
        Claim(
            "5b",
            title="LayerNorm + d: increasing like l2",
            section="App. B",
            statement='LayerNorm with d scaling "recovers behavior similar to l2 normalization": the increasing '
            "pattern",
            metric="key-order concordance of LayerNorm + d, smallest over layers 2+ (paper)",
            unit="share of key pairs",
            direction=">",
            threshold="concordance",
            measured_by="causalpos.analysis.claims.simulation_claims.claim5",
        ),
        Claim(
            "5c",
            title="LayerNorm + d: l2's size (×2)",
            section="App. B",
            statement="... and similar in size to l2's (two-sided)",
            metric="|log (nearer-key advantage of LayerNorm + d / l2's)|, largest over layers 2+ (paper)",
            unit="|log ratio|",
            direction="<",
            threshold="size_log_ratio",
            measured_by="causalpos.analysis.claims.simulation_claims.claim5",
        ),
        Claim(
            "6a",
            title="RoPE + mask: non-relative",
            section="5.1, App. D",
            statement="RoPE with the causal mask gives a non-relative pattern from layer 2 (paper) on (Fig. 4, 9)",
            metric="non-relative amplitude, weakest layer from layer 2 (paper) on",
            unit="fraction of score RMS",
            direction=">",
            threshold="nonrelative",
            measured_by="causalpos.analysis.claims.simulation_claims.claim6",
        ),
        Claim(
            "6b",
            title="RoPE + mask: left region darker",
            section="5.1",
            statement='"The left portion of the attention maps appears darker than other regions" (RoPE + mask; no '
            "layer or region named: every named region must agree)",
            metric="left-region deficit (mean band-centred score / score SD), the region nearest 0 in SEs",
            unit="score SDs",
            direction="<",
            threshold="left_deficit",
            measured_by="causalpos.analysis.claims.simulation_claims.claim6",
        ),
        Claim(
            "6c",
            title="RoPE without mask: relative",
            section="5.1, App. D",
            statement="RoPE without the causal mask gives a relative pattern (Fig. 10)",
            metric="non-relative amplitude, largest over layers 2+ (paper)",
            unit="fraction of score RMS",
            direction="<",
            threshold="nonrelative",
            measured_by="causalpos.analysis.claims.simulation_claims.claim6",
        ),
        Claim(
            "6d",
            title="RoPE layer 1: no pattern beyond noise",
            section="5.1",
            statement='"The first layer ...: when the input is independent Gaussian noise, RoPE alone does not '
            'affect the inner products" (RoPE + mask, layer 1 (paper))',
            metric="non-relative RMS of layer 1 (paper) in Monte Carlo noise RMS",
            unit="noise RMS",
            direction="<",
            threshold="noise_level",
            measured_by="causalpos.analysis.claims.simulation_claims.claim6",
        ),
        Claim(
            "6e",
            title="RoPE: relative clearer at layer 3",
            section="5.1",
            statement='"By the third layer, this relative pattern becomes even clearer" (RoPE + mask)',
            metric="share of score variance explained by i - j, layer 3 (paper) over layer 2 (paper)",
            unit="ratio",
            direction=">",
            threshold="clarity_gain",
            measured_by="causalpos.analysis.claims.simulation_claims.claim6",
        ),
        Claim(
            "7a",
            title="trained NoPE: increasing at (f), (i)",
            section="4.2",
            statement="The trained NoPE model shows the increasing pattern by (f) LN(O) and in the layer-2 (paper) "
            "scores (i) (keys >= 1: the attention-sink column left out)",
            metric="key-order concordance, keys >= 1",
            unit="share of key pairs",
            direction=">",
            threshold="concordance",
            measured_by="causalpos.analysis.claims.model_claims.claim7",
        ),
        Claim(
            "7b",
            title="trained NoPE stronger than α = 0",
            section="4.2",
            statement='Its learned parameters make the layer-2 (paper) pattern "much stronger" than the alpha = 0 '
            "simulation",
            metric="standardised nearer-key advantage of (i) relative to the alpha = 0 simulation",
            unit="ratio",
            direction=">",
            threshold="trained_gain",
            measured_by="causalpos.analysis.claims.model_claims.claim7",
        ),
        Claim(
            "7c",
            title="trained NoPE (i): query-independent",
            section="4.2",
            statement='... and "i-independent", like the alpha > 0 case (stage (i), keys >= 1)',
            metric="share of the (i) score variance that depends on the query at fixed key, keys >= 1",
            unit="variance share",
            direction="<",
            threshold="query_share",
            measured_by="causalpos.analysis.claims.model_claims.claim7",
        ),
        Claim(
            "7d",
            title="(a) nearly orthogonal",
            section="4.2",
            statement='(a) "inner products after LayerNorm are close to zero except along the main diagonal": the '
            "alpha = 0 case",
            metric="RMS off-diagonal over RMS diagonal entry of (a), keys >= 1",
            unit="ratio",
            direction="<",
            threshold="orthogonal",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "7e",
            title="(a) → (b) off/diagonal grows",
            section="4.2",
            statement='(a) to (b): "the ratio of off-diagonal to diagonal values increases substantially"',
            metric="RMS off-diagonal / RMS diagonal of (b) over that of (a), keys >= 1",
            unit="ratio",
            direction=">",
            threshold="stage_gain",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "7f",
            title="(c) diagonal decreasing",
            section="4.2",
            statement='(c) "the main diagonal values decrease with increasing i, j" (h\'(i) decreasing)',
            metric="diagonal concordance of (c): share of positions i < i' with a lower diagonal at i', positions >= 1",
            unit="share of pairs",
            direction=">",
            threshold="concordance",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "7g",
            title="(c) off-diagonal uniform in j",
            section="4.2",
            statement='(c) "the off-diagonal values remain nearly uniform" (g\'(i) nearly independent of j)',
            metric="share of the (c) off-diagonal variance that changes with the key at fixed query, keys >= 1",
            unit="variance share",
            direction="<",
            threshold="key_share",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "7h",
            title="(c) → (d) off/diagonal grows",
            section="4.2",
            statement='(c) to (d): "the ratio between the diagonal and off-diagonal elements is significantly '
            'increased compared to (c)", "analogous to the relationship between (a) and (b)" (our reading: '
            "off-diagonal over diagonal grows, as from (a) to (b); the paper's words name the ratio the other "
            "way round)",
            metric="RMS off-diagonal / RMS diagonal of (d) over that of (c), keys >= 1",
            unit="ratio",
            direction=">",
            threshold="stage_gain",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "7i",
            title="(g) pattern inverted",
            section="4.2",
            statement='(g) the FFN and residual "appears to laterally invert the pattern"',
            metric="key-order concordance of (g), keys >= 1",
            unit="share of key pairs",
            direction="<",
            threshold="inverted_concordance",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "7j",
            title="(h) pattern restored",
            section="4.2",
            statement='(h) "a subsequent LayerNorm restores it"',
            metric="key-order concordance of (h), keys >= 1",
            unit="share of key pairs",
            direction=">",
            threshold="concordance",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "7k",
            title="(e) almost identical to (d)",
            section="4.2",
            statement='(d) to (e): "After adding the residual (e), the trend is almost identical to (d)"',
            metric="smaller Pearson r of (d) and (e): over their diagonals and over their off-diagonal entries, "
            "keys >= 1",
            unit="correlation",
            direction=">",
            threshold="pattern_r",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "7l",
            title="(c) diagonal follows h'(i)²",
            section="4.2, App. A.2",
            statement='(c) "The diagonal corresponds to h(i)^2 with the residual term removed": h\'(i)^2 of A.2 '
            '(the squared norm <x_i^(1), x_i^(1)>), at alpha = 0 as (a) "corresponds to the case alpha = 0"',
            metric="Pearson r of the diagonal of (c) with the closed form h'(i)^2 (alpha = 0, no residual), "
            "positions >= 1",
            unit="correlation",
            direction=">",
            threshold="pattern_r",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "7m",
            title="(c) off-diagonal weakly dependent on i",
            section="4.2, App. A.2",
            statement="(c) \"g'(i) is ... only weakly dependent on i, explaining the uniformity of the off-diagonal "
            'elements" (next to the diagonal, which falls with i)',
            metric="SD over queries of the mean off-diagonal entry of each row of (c) / SD of its diagonal, keys >= 1",
            unit="ratio of SDs",
            direction="<",
            threshold="query_spread",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "7n",
            title="Fig. 8: later layers increasing (diagonal-normalised)",
            section="4.2, App. C (Fig. 8)",
            statement="Figure 8 shows the later layers' attention patterns (\"drawn with a same manner to Figure "
            '3") without a word on them; our reading, of the maps as the authors draw them (diagonal-normalised): '
            "each row rises with the key once its diagonals' means are taken out, in every later layer (one row "
            "per layer, keys >= 1)",
            metric="key-order concordance of the layer's diagonal-normalised scores, keys >= 1",
            unit="share of key pairs",
            direction=">",
            threshold="concordance",
            measured_by="causalpos.analysis.claims.figure3_claims.claim7_stages",
        ),
        Claim(
            "8a",
            title="LLM: non-relative pattern, per layer",
            section="5.2",
            statement="Pretrained RoPE LLMs show a non-relative pattern at a scale that is not negligible next to "
            "the raw scores (per layer; keys >= 1, the attention-sink column separately)",
            metric="non-relative amplitude, keys >= 1",
            unit="fraction of score RMS",
            direction=">",
            threshold="nonrelative",
            measured_by="causalpos.analysis.claims.model_claims.claim8",
            per_layer=True,
        ),
        Claim(
            "8b",
            title="LLM: non-relative, median of layers 2+",
            section="5.2",
            statement="The same over the layers from layer 2 (paper) on",
            metric="median non-relative amplitude over layers 2+ (paper), keys >= 1",
            unit="fraction of score RMS",
            direction=">",
            threshold="nonrelative",
            measured_by="causalpos.analysis.claims.model_claims.claim8",
        ),
        Claim(
            "8c",
            title="LLM: pattern range / score range",
            section="5.2",
            statement='"The non-relative patterns [are] in [-1, 1] scale" next to scores "in [-10^1, 10^1] '
            'scale": not negligible (layers 2+ (paper))',
            metric="median over layers 2+ (paper) of the 1%-99% range of the diagonal-normalised pattern over that "
            "of the raw scores, keys >= 1",
            unit="range ratio",
            direction=">",
            threshold="range_ratio",
            measured_by="causalpos.analysis.claims.model_claims.claim8",
        ),
        Claim(
            "8d",
            title="LLM: first keys emphasised",
            section="5.2",
            statement='"This pattern non-uniformly emphasizes the first few keys" (per layer; keys 1-4, key 0 apart)',
            metric="mean diagonal-normalised score of keys 1-4 / score SD, keys >= 1",
            unit="score SDs",
            direction=">",
            threshold="first_keys",
            measured_by="causalpos.analysis.claims.model_claims.claim8",
            per_layer=True,
        ),
        Claim(
            "9a",
            title="verdicts the same under both input laws",
            section="4.1",
            statement="The verdicts do not depend on how the inputs are drawn: the paper's construction (\"a shared "
            "Gaussian component with an independent Gaussian noise component\", as in the authors' notebooks) "
            "and our exact-moment law (unit norm and E<x_i, x_j> = alpha exactly; a robustness check of ours) "
            "agree",
            metric="agreement of a claim's verdicts under the two laws (1 same, 0.5 one inconclusive, 0 opposite)",
            unit="agreement",
            direction=">",
            threshold="law_agreement",
            measured_by="causalpos.analysis.claims.robustness.claim9",
        ),
        Claim(
            "10a",
            title="recursion: the pattern's shape (ours)",
            section="ours (issue 25), beyond 3.2",
            statement="Ours, not the paper's: the large-d recursion of the Gram matrices (simulation/recursion.py; "
            "Eq. 4 is its first step) predicts the Monte Carlo scores at every layer, in shape",
            metric="Pearson r of Monte Carlo on the recursion, visible off-diagonal pairs, weakest layer 2+ (paper)",
            unit="r",
            direction=">",
            threshold="pattern_r",
            measured_by="causalpos.analysis.claims.large_d.claim10",
        ),
        Claim(
            "10b",
            title="recursion: the scores themselves (ours)",
            section="ours (issue 25), beyond 3.2",
            statement="Ours: the recursion predicts the Monte Carlo scores themselves, with 1a's tolerance for Eq. 4 "
            "(the finite-d corrected recursion for l2 and LayerNorm with d scaling, else its leading order)",
            metric="R² of Monte Carlo on the recursion, visible off-diagonal pairs, weakest layer 2+ (paper)",
            unit="R²",
            direction=">",
            threshold="eq4_r2",
            measured_by="causalpos.analysis.claims.large_d.claim10",
        ),
        Claim(
            "10c",
            title="recursion: where rows stop rising (ours)",
            section="ours (issue 25), 4.1",
            statement="Ours: the recursion predicts which rows break the paper's \"strictly increasing for j <= i "
            'with fixed i" (claim 2c) and where they peak',
            metric="share of the rows Monte Carlo resolves violated or the recursion predicts breaking that both "
            "name (no value where neither names a row)",
            unit="share of rows",
            direction=">=",
            threshold="break_agreement",
            measured_by="causalpos.analysis.claims.large_d.claim10",
        ),
        # ours, registered before their numbers existed (issue 43): the window's own effect; the registration is the
        # claim (the old 10d-10e compared queries before and after the window with no reference without it)
        REGISTRATIONS["10d"].claim,
        REGISTRATIONS["10e"].claim,
        Claim(
            "11a",
            title="the pattern hurts longer contexts (ours)",
            section="ours (issue 27), tests 5.2's conjecture",
            statement="Ours, testing Section 5.2's \"Since this pattern non-uniformly emphasizes the first few keys, it "
            'may potentially negatively affect length generalization" on our trained models: subtracting '
            "each layer's non-relative pattern from its logits at inference shrinks the loss gap to the "
            "training length more than subtracting the same values shuffled within each band",
            metric="effect of removing the non-relative pattern on the loss gap at k x the training length (gap under "
            "'pattern' minus gap under the shuffled control), mean over training seeds",
            unit="nats per token",
            direction="<",
            threshold="ablation_effect",
            measured_by="causalpos.analysis.claims.ablation_claims.claim11",
        ),
        # ours, registered before their numbers existed (issue 43): the registration is the claim
        REGISTRATIONS["12a"].claim,
        REGISTRATIONS["12b"].claim,
    )
}


@dataclass(frozen=True)
class Topic:
    """What the claims of one number are about, and the page of the claims figure (figures.ledger) that
    shows them."""

    number: int
    subject: str  # in the title of the page
    page: str  # "first-last": the claim numbers the page shows
    target: str = ""  # the target rule whose own ledger alone has these claims ("": every ledger of all claims)


TOPICS = {
    topic.number: topic
    for topic in (
        # Sections 3-4, App. A-B: the causal mask alone, in simulation
        Topic(1, "Eq. 4 and the closed forms", "1"),
        Topic(2, "the increasing pattern at α = 0", "2-3"),
        Topic(3, "α > 0", "2-3"),
        # 4.1, 5.1, App. B, D: the pattern's kind, LayerNorm, RoPE
        Topic(4, "not relative, not absolute", "4-6"),
        Topic(5, "LayerNorm's scaling", "4-6"),
        Topic(6, "RoPE", "4-6"),
        # 4.2, 5.2: trained and pretrained models (claim 7 on pages of its own: 7a-7j, 7k-7n); 9: the input law
        Topic(7, "the trained NoPE model", "7"),
        Topic(8, "pretrained RoPE LLMs", "8-9"),
        Topic(9, "the input law", "8-9"),
        # ours (issue 25): theory for every layer
        Topic(10, "the large-d recursion (ours)", "10"),
        # ours (issue 27): Section 5.2's conjecture, by ablation
        Topic(11, "the pattern and length generalisation (ours)", "11"),
        # ours (issue 43): is the pattern the mask's? Its own ledger (target mask_controls), not the default run's
        Topic(12, "the pattern under content controls (ours)", "12", target="mask_controls"),
    )
}
# at most MAX_PAGE_CLAIMS claims on a page: 2 rows of 5 panels, so a page stays under figures.style.MAX_ASPECT
# (the report in a 1280 x 720 window; tests/integration/test_claims_figure.py checks that a full page fits)
MAX_PAGE_CLAIMS = 10


def _page_claims() -> dict:
    """page -> the claim ids it shows, in order: each topic page's claims of CLAIMS, cut into pages of at most
    MAX_PAGE_CLAIMS named by their first and last claim ("7a-7j") where a topic page needs more than one."""
    pages = {}
    for topic_page in dict.fromkeys(topic.page for topic in TOPICS.values()):
        ids = [c for c in CLAIMS if TOPICS[claim_number(c)].page == topic_page]
        chunks = [ids[i : i + MAX_PAGE_CLAIMS] for i in range(0, len(ids), MAX_PAGE_CLAIMS)] or [[]]
        for chunk in chunks:
            pages[topic_page if len(chunks) == 1 else f"{chunk[0]}-{chunk[-1]}"] = tuple(chunk)
    return pages


# the claims figure's pages, in order: page -> the claim ids it shows, and page -> the claim numbers among them
PAGE_CLAIMS = _page_claims()
PAGES = {page: tuple(dict.fromkeys(map(claim_number, ids))) for page, ids in PAGE_CLAIMS.items()}


def page_of(claim_id: str) -> str:
    """The page of the claims figure (a key of PAGES) that shows `claim_id`; a claim id the catalogue does not
    list goes on the first page of its number's topic."""
    for page, ids in PAGE_CLAIMS.items():
        if claim_id in ids:
            return page
    number = claim_number(claim_id)
    if number not in TOPICS:
        raise ValueError(f"claim {claim_id!r} is on no page of the claims figure (catalogue.TOPICS)")
    return next(page for page, numbers in PAGES.items() if number in numbers)


def ledger_pages(claim: int | None = None) -> list[str]:
    """The pages of the claims figure a ledger of every claim (None) or of one claim's rows (paper_llms's 8)
    has: what rule claims writes, known before it runs."""
    pages = [
        page
        for page, claims in PAGES.items()
        if (int(claim) in claims if claim is not None else not any(TOPICS[n].target for n in claims))
    ]
    if not pages:
        raise ValueError(f"claim {claim!r} is on no page of the claims figure (catalogue.PAGES)")
    return pages


# the claims of a ledger of every claim (the default run's): those of the topics that are no target's own
LEDGER_CLAIMS = tuple(claim_id for claim_id in CLAIMS if not TOPICS[claim_number(claim_id)].target)


def verdict(p_value: float, p_against: float, alpha: float = THRESHOLDS["family_alpha"]) -> str:
    """'supported' if p_value <= alpha, 'not supported' if p_against <= alpha, else 'inconclusive' (also for
    NaN p's, and where both are <= alpha, which one-sided p's of one estimate cannot be: they sum to 1). The
    ledger passes Holm-adjusted p's (family.adjust)."""
    p_value, p_against = float(p_value), float(p_against)
    if p_value <= alpha and not p_against <= alpha:
        return "supported"
    if p_against <= alpha and not p_value <= alpha:
        return "not supported"
    return "inconclusive"
