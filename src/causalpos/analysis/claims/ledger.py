"""The ledger: every claim builder in order (build_ledger) and the ledger as Markdown (ledger_markdown)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from causalpos.analysis.claims import (
    ablation_claims,
    closed_forms,
    figure3_claims,
    large_d,
    later_layers,
    mask_controls,
    model_claims,
    robustness,
    simulation_claims,
)
from causalpos.catalogue.claims import CLAIMS, EXTRA_COLUMNS, LEDGER_COLUMNS, THRESHOLDS, VERDICTS, merge_thresholds
from causalpos.analysis.claims.family import adjust, adjust_apart, in_family, is_exact, ours_apart, ours_marked
from causalpos.catalogue.readings import OWN_CLAIM
from causalpos.analysis.claims.replicates import LedgerInputs
from causalpos.analysis.triangles import FIRST_KEYS
from causalpos.models.progress import Steps

# the builders that read the simulation tables, in claim order: built again on the exact-law twins (claim 9a)
SIM_BUILDERS = (
    simulation_claims.claim1,
    closed_forms.claim1_appendix,
    simulation_claims.claim2,
    later_layers.claim2_figure1_cosine,
    simulation_claims.claim3,
    later_layers.claim3_by_layer,
    simulation_claims.claim4,
    simulation_claims.claim5,
    simulation_claims.claim6,
    model_claims.claim7,
)
BUILDERS = SIM_BUILDERS + (figure3_claims.claim7_stages, model_claims.claim8)
# our own claims (not the paper's), one Holm family per claim: adding one leaves the paper's verdicts, and those of
# our other claims, as they are
# claim 10's window rows (10d-10e) a family of their own, as registered (catalogue.preregistered)
OWN_FAMILIES = (
    (large_d.claim10,),
    (large_d.claim10_windows,),
    (ablation_claims.claim11,),
    (mask_controls.claim12,),
)
OWN_CLAIMS = (10, 11, 12)  # their claim numbers


def build_ledger(
    simulations: pd.DataFrame | None,
    theory: pd.DataFrame | None,
    scores: pd.DataFrame | None,
    intermediates: pd.DataFrame | None,
    groups: pd.DataFrame | None,
    thresholds: dict | None = None,
    n_bootstrap: int = 200,
    seed: int = 0,
    simulation_groups: pd.DataFrame | None = None,
    recursion: pd.DataFrame | None = None,
    window_test: pd.DataFrame | None = None,
    pattern_ablation: pd.DataFrame | None = None,
    controls: dict | None = None,
) -> pd.DataFrame:
    """The claims ledger: one row per claim and setting (see catalogue's docstring), claims in order 1a .. 11a.

    Any table may be None or empty: the claims that need it get rows with value NaN, verdict
    "inconclusive" and a note. A table missing a needed column raises ValueError.

    Verdicts: Holm over the paper's claims' rows (family.adjust, at thresholds' family_alpha), after every builder
    ran, and apart over the rows on our own readings (catalogue.readings.OUR_READINGS, column `ours`); the exact-law
    twin rows that claim 9a compares get a Holm of their own first (their family: the twin
    rows), so that both verdicts of a pair follow the same rule. 9a's rows are not tests (outside the family).
    Each of our own claims (10, 11, 12) is a family of its own (OWN_FAMILIES): their tests take no power from the
    paper's, nor from each other's. `controls`: condition -> (scores, groups) of the pretrained models on each
    condition's sequences (catalogue.models.CONDITIONS; claim 12, target mask_controls's ledger; None: no claim-12
    rows).
    """
    th = merge_thresholds(thresholds)
    if int(n_bootstrap) < 2:
        raise ValueError(f"n_bootstrap must be >= 2 to estimate an uncertainty, got {n_bootstrap}")
    data = LedgerInputs(
        simulations,
        theory,
        scores,
        intermediates,
        groups,
        int(n_bootstrap),
        int(seed),
        simulation_groups,
        recursion,
        window_test,
        pattern_ablation,
        controls,
    )
    rows = []
    # the builders take ~30 s in the default run together: a line as each ends (issue 42)
    steps = Steps("claims", len(BUILDERS) + (len(SIM_BUILDERS) if data.twins else 0) + 1)
    for build in BUILDERS:
        built = build(data, th)
        rows.extend(built)
        steps.done(f"{build.__name__}, {len(built)} rows")
    twin_rows = []
    if data.twins:
        twins = data.twin_view()
        for build in SIM_BUILDERS:
            built = build(twins, th)
            twin_rows.extend(built)
            steps.done(f"{build.__name__} under the exact-moment law, {len(built)} rows")
    # the paper's claims in the paper's scope are one family, the rows on our readings another (ours_apart)
    rows = adjust_apart(ours_marked(rows), th["family_alpha"], ours_apart)
    own = [
        {**r, "ours": OWN_CLAIM}
        for family in OWN_FAMILIES
        for r in adjust([r for build in family for r in build(data, th)], th["family_alpha"])
    ]
    steps.done(f"our claims' families, {len(own)} rows")
    twins = adjust_apart(ours_marked(twin_rows), th["family_alpha"], ours_apart)
    rows.extend(ours_marked(robustness.claim9(rows, twins, data, th)))
    ledger = pd.DataFrame(rows + own)
    ledger = ledger.iloc[np.argsort(ledger["claim"].to_numpy(), kind="stable")]  # 9a is built after the family's
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


def ledger_alpha(ledger: pd.DataFrame) -> float:
    """The family-wise alpha the ledger's verdicts used (its `alpha` column; the default without one)."""
    if "alpha" in ledger.columns and ledger["alpha"].notna().any():
        return float(ledger["alpha"].dropna().iloc[0])
    return THRESHOLDS["family_alpha"]


def format_p(p: float, underflow: bool = True) -> str:
    if not np.isfinite(p):
        return "n/a"
    if p == 0:  # the normal tail below the smallest double, or a replicate SD of 0 (no underflow)
        return "<1e-300" if underflow else "0"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def p_text(row) -> str:
    """The adjusted p's for and against the claim ("exact" for an exact row, "n/a" without p's)."""
    p_for, p_against = float(row.get("p_adjusted", np.nan)), float(row.get("p_against_adjusted", np.nan))
    if not (np.isfinite(p_for) or np.isfinite(p_against)):
        return "n/a"
    if is_exact(row.get("exact")):
        return "exact"
    underflow = float(row.get("uncertainty", np.nan)) != 0
    return f"{format_p(p_for, underflow)} / {format_p(p_against, underflow)}"


# per model and layer (8a, 8d): one summary line per model, the layers in a table below
PER_LAYER = tuple(claim.id for claim in CLAIMS.values() if claim.per_layer)


def verdict_cell(verdict: str) -> str:
    return f"**{verdict}**" if verdict != "inconclusive" else verdict


def counts_text(verdicts: pd.Series) -> str:
    """ "n supported, n not supported, n inconclusive", then the rows that hold by construction apart (not tests)."""
    counts = verdicts.value_counts()
    tested = [v for v in VERDICTS if v != "by construction"]
    text = ", ".join(f"{counts.get(v, 0)} {v}" for v in tested)
    built = counts.get("by construction", 0)
    return text + (f"; {built} by construction (not a test)" if built else "")


def threshold_text(row) -> str:
    return f"{row['direction']} {row['threshold']:g}"


def own_text(ledger: pd.DataFrame) -> str:
    """The Markdown's words on our own claims (OWN_CLAIMS) the ledger has: each a Holm family of its own."""
    tested = in_family(ledger)
    counts = {
        n: int((tested & (ledger["claim"] == n).to_numpy()).sum()) for n in OWN_CLAIMS if (ledger["claim"] == n).any()
    }
    if not counts:
        return ""
    text = (
        " Our own claims are Holm-adjusted apart, each over its own rows that test something ("
        + ", ".join(f"claim {n}: {k}" for n, k in counts.items())
        + "), so they take no power from the paper's."
    )
    if 10 in counts:
        text += " Claim 10's window rows (10d-10e, registered in issue 43) are a family of their own."
    if 11 in counts:
        text += (
            " Claim 11's standard error is the SD over training seeds / sqrt(n), its p's Student's t with n - 1 "
            "degrees of freedom (not the normal approximation); one seed gives no verdict."
        )
    return text


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def verdict_counts(rows: pd.DataFrame) -> str:
    counts = rows["verdict"].value_counts()
    return ", ".join(f"{counts.get(v, 0)} {v}" for v in ("supported", "not supported", "inconclusive"))


def headline(ledger: pd.DataFrame) -> str:
    """The ledger's rows counted by kind (catalogue.readings): the tests of the paper's claims in the paper's scope
    (the paper's Holm family) apart from the tests on our readings, the exact rows, the agreement rows and what
    holds by construction; our own claims last. One paragraph, for claims.md and the README."""
    own = ledger["claim"].isin(OWN_CLAIMS)
    paper, ours = ledger[~own & (ledger["ours"] == "")], ledger[~own & (ledger["ours"] != "")]
    tests = paper[paper["row_kind"] == "test"]
    our_tests = ours[ours["row_kind"] == "test"]
    exact = ledger[~own & (ledger["row_kind"] == "exact")]
    built = ledger[~own & (ledger["row_kind"] == "by construction")]
    agreement = ledger[ledger["row_kind"] == "agreement"]
    references = tests.loc[tests["p_value"].notna(), "reference"].value_counts()
    parts = [
        f"**{len(tests)} tests of the paper's claims** in the paper's scope: {verdict_counts(tests)} "
        f"(Holm over the {int(in_family(tests).sum())} with p-values, family-wise {ledger_alpha(ledger):g}; "
        + ", ".join(f"{n} referred to {ref}" for ref, n in references.items())
        + ")",
        f"{len(our_tests)} tests on our own readings of them (our settings, thresholds or readings: "
        f"{verdict_counts(our_tests)}, Holm apart)",
        f"{len(exact)} exact rows (closed forms and symbolic checks: {verdict_counts(exact)})",
        f"{len(built)} by construction",
        f"{len(agreement)} agreement rows (claim 9a: {int((agreement['value'] == 1).sum())} of {len(agreement)} "
        "verdicts the same under our exact-moment input law)",
    ]
    # a ledger of our own claims alone (length_seeds's 11, mask_controls's 12) counts no rows of the paper's
    text = "; ".join(parts) + "." if not own.all() else ""
    for number in OWN_CLAIMS:
        rows = ledger[ledger["claim"] == number]
        if len(rows):
            tested = rows[rows["row_kind"] == "test"]
            decided = rows[rows["row_kind"] == "decision"]
            text += f"{' ' if text else ''}Our claim {number}: {plural(len(tested), 'test')} ({verdict_counts(tested)})"
            text += f", {plural(len(decided), 'decision')} ({verdict_counts(decided)})." if len(decided) else "."
    return text


def ledger_markdown(ledger: pd.DataFrame, model_labels: dict | None = None) -> str:
    """The ledger as Markdown: one table of every claim (its statement on its first row; the per-layer claims
    8a and 8d summarised per model, claim 9a in one line), then a table of claims 8a and 8d per model and
    layer, one of claim 7 with the first k keys left out (model_claims.KEY_SWEEP), and one of claim 9a's comparisons of
    the two input laws. `model_labels`: the models' names in the per-layer table (default: their keys)."""
    alpha = ledger_alpha(ledger)
    m = int((in_family(ledger) & ~ledger["claim"].isin(OWN_CLAIMS).to_numpy() & (ledger["ours"] == "")).sum())
    lines = [
        headline(ledger),
        "",
        "Each row is one claim of the paper measured in one setting: value ± one standard error (the spread of "
        "the metric itself under a bootstrap over groups of Monte Carlo sample blocks for the simulations, over "
        "groups of sequences for the trained and pretrained models). Each test row tests its claim one-sided "
        "against its threshold (z = (value - threshold) / standard error, referred to the normal for the "
        "simulations and to Student's t with G - 1 degrees of freedom for a bootstrap over G groups of "
        "sequences; a metric whose replicates never vary gets the bootstrap's smallest p, 1 / (R + 1)): a "
        "p-value for the claim and one against it, each Holm-adjusted over the "
        f"{m} rows of the paper's claims in the paper's scope that test something (column p (adjusted), for / "
        "against); the rows on our own settings, thresholds or readings (marked *ours*) are adjusted apart, so "
        f"they take no power from the paper's. A claim is **supported** where "
        f"its adjusted p is at most {alpha:g}, **not supported** where the adjusted p against it is, and "
        f'inconclusive otherwise: the chance of any false "supported" among the {m} rows is at most {alpha:g}, '
        f'and so is the chance of any false "not supported" (Holm, whatever the dependence between the rows). '
        "Claims 2c (every step of every row for it, any decreasing pair of keys against, Bonferroni over the "
        "pairs) and 6b (every named region must agree, either way) combine sub-tests into one p each way. Exact "
        "rows (closed forms, symbolic checks) are certain, not counted among the tests; 9a compares two verdicts "
        "and is not a test (the twins it compares are adjusted in a family of their own); a property that holds "
        "by construction is marked so. Layers are numbered as in the paper (from 1), positions from 0 as in the "
        "tables." + own_text(ledger),
        "",
        "| claim | setting | metric | value | threshold | p (adjusted), for / against | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    per_layer = ledger[ledger["claim_id"].isin(PER_LAYER) & ledger["layer"].notna()]
    law = (
        ledger[(ledger["claim_id"] == "9a") & ledger["compared_claim"].notna()]
        if "compared_claim" in ledger.columns
        else ledger.iloc[:0]
    )
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
            lines.append(
                f"| {claim} | {cell(row['model'])}, each of {len(rows)} layers | {metric} | see below | "
                f"{threshold_text(row)} | see below | {counts_text(rows['verdict'])} |"
            )
            continue
        if row["claim_id"] == "9a" and len(law) and pd.notna(row.get("compared_claim")):
            if "9a" in summarised:
                continue
            summarised.add("9a")
            text = f"{len(law)} claim and setting pairs: {counts_text(law['verdict'])}"
            lines.append(
                f"| {claim} | exact-law twins, {len(law)} comparisons (below) | {metric} | "
                f"{(law['value'] == 1).sum()} of {len(law)} the same | {threshold_text(row)} | not a test | "
                f"{text} |"
            )
            continue
        value = format_value(row["value"], row["uncertainty"])
        setting = cell(row["setting"]) + (" (*ours*)" if row.get("ours") and row["claim"] not in OWN_CLAIMS else "")
        lines.append(
            f"| {claim} | {setting} | {metric} | {value} | {threshold_text(row)} | "
            f"{p_text(row)} | {verdict_cell(row['verdict'])} |"
        )
    if len(per_layer):
        lines += [
            "",
            "Claims 8a and 8d per layer. Non-relative amplitude (8a): the RMS of the scores' departure from "
            "a function of i - j over the RMS spread of the scores, over keys >= 1 (the verdict's metric) and "
            "with the attention-sink key 0. Range ratio: the 1%-99% range of the diagonal-normalised pattern "
            "over that of the raw scores (8c takes its median). Left-region deficit: the mean band-centred "
            "score of keys 1 to S/4 in score SDs (< 0: the first keys score lower than their diagonals, > 0: "
            "higher). First keys (8d): the same for keys 1-4, and for key 0 alone.",
            "",
            "| model | layer | 8a amplitude, keys >= 1 | with key 0 | range ratio | left-region deficit | "
            "8a verdict (p adjusted, for / against) | 8d keys 1-4 | key 0 | 8d verdict (p) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        amp = per_layer[per_layer["claim_id"] == "8a"].set_index(["model", "layer"])
        first = per_layer[per_layer["claim_id"] == "8d"].set_index(["model", "layer"])
        for key in dict.fromkeys(list(amp.index) + list(first.index)):
            a = amp.loc[key] if key in amp.index else None
            f = first.loc[key] if key in first.index else None

            def pick(frame, value, se):
                return "" if frame is None else format_value(frame[value], frame[se])

            def judged(frame):
                return "" if frame is None else f"{frame['verdict']} ({p_text(frame)})"

            lines.append(
                f"| {cell((model_labels or {}).get(key[0], key[0]))} | {int(key[1]) + 1} | {pick(a, 'value', 'uncertainty')} | "
                f"{pick(a, 'value_with_sink', 'uncertainty_with_sink')} | "
                f"{pick(a, 'range_ratio', 'range_ratio_uncertainty')} | "
                f"{pick(a, 'left_deficit', 'left_deficit_uncertainty')} | "
                f"{judged(a)} | {pick(f, 'value', 'uncertainty')} | "
                f"{pick(f, 'sink_emphasis', 'sink_emphasis_uncertainty')} | {judged(f)} |"
            )
    sweep = ledger[(ledger["claim"] == 7) & ledger["value"].notna()]
    if len(sweep):  # claim 7 with the first k keys left out (catalogue's docstring, First keys)
        lines += [
            "",
            "Claim 7 with the first keys left out: each row's metric over the keys (and diagonal positions) "
            f">= k. The verdict is on k = {model_claims.KEYS_FROM} (key 0, the attention sink, left out); k = "
            f"{model_claims.KEYS_FROM + FIRST_KEYS} leaves out the sink and the first few keys of 8d too.",
            "",
            "| claim | setting | " + " | ".join(f"k = {k}" for k in model_claims.KEY_SWEEP) + " |",
            "| --- | --- |" + " --- |" * len(model_claims.KEY_SWEEP),
        ]
        for _, row in sweep.iterrows():
            values = [
                format_value(row["value"], row["uncertainty"])
                if k == model_claims.KEYS_FROM
                else format_value(*(row[c] for c in model_claims.sweep_columns(k)))
                for k in model_claims.KEY_SWEEP
            ]
            lines.append(f"| {row['claim_id']} | {cell(row['setting'])} | " + " | ".join(values) + " |")
    if len(law):
        lines += [
            "",
            "Claim 9a: each claim and setting measured on a variant of the paper's construction (sampler "
            "official) that has an exact-law twin (our exact-moment law: the same parameters but the sampler), "
            "measured again with the twin in its place, and both verdicts.",
            "",
            "| claim | setting | paper's construction | exact-moment law | change (exact - paper's) | verdicts |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for _, row in law.iterrows():
            same = {1.0: "the same", 0.5: "one inconclusive", 0.0: "**opposite**"}.get(float(row["value"]), "")
            setting = str(row["setting"]).split(": ", 1)[-1]
            lines.append(
                f"| {row['compared_claim']} | {cell(setting)} | "
                f"{format_value(row['official_value'], row['official_uncertainty'])}, "
                f"{row['official_verdict']} | {format_value(row['exact_value'], row['exact_uncertainty'])}, "
                f"{row['exact_verdict']} | {format_value(row['law_change'], row['law_change_uncertainty'])} | "
                f"{same} |"
            )
    return "\n".join(lines) + "\n"
