"""Claims registered before their numbers exist (issue 43): statement, metric, threshold, expected direction,
Holm family, rows and the uncertainty each will carry, committed before any code measures them.

A registration is frozen: when a registered claim lands in the ledger (catalogue.claims.CLAIMS, its threshold in
catalogue.thresholds.THRESHOLD_RECORDS), its statement, metric, unit, direction and threshold must be those
registered here (tests/unit/test_preregistration.py), so what the numbers are judged by was fixed before anyone
saw them. A registration is changed only by a new registration that says why, in `amended`, and docs/claims.md
says which commit registered what.

All of them are ours: the paper states none of these tests. Claim 12 asks whether the non-relative pattern of
Section 5.2 is the causal mask's work and not the content of the sequences (every extracted sequence starts at a
document start, where headlines and openings could make a non-relative mean map of their own). Claim 13 is the
trained counterpart of claim 6c (the paper's Appendix Figure 10: without the mask RoPE's pattern stays relative).
10d and 10e are rewritten: the old ones compared queries before and after Gemma-3's window of 512, but a
mask-induced pattern concentrates near the sequence start in any causal model, so a drop past 512 is expected with
no window at all; the window's own effect is the change with the window minus the change with it lifted.
"""

from __future__ import annotations

from dataclasses import dataclass

from causalpos.catalogue.records import Claim, Threshold


@dataclass(frozen=True)
class Registration:
    """One registered claim: the ledger's Claim as it will be, its threshold record, what we expect and why, the
    Holm family it is tested in, its rows (what one row is), what its uncertainty covers and N."""

    claim: Claim
    threshold: Threshold
    expected: str  # the outcome we expect, in words, and the reading that predicts it
    family: str  # its Holm family (a family apart from the paper's claims and from each other)
    rows: str  # one ledger row per ...
    uncertainty: str  # what the standard error covers, and N
    amended: str = ""  # empty: the first registration


def _threshold(key, default, bounds, meaning, why) -> Threshold:
    return Threshold(key, default, bounds, meaning, why)


SURVIVAL = _threshold(
    "control_survival",
    0.5,
    "(0, 1]",
    "a ratio of amplitudes (control over documents) the metric must exceed",
    "12a (ours): the pattern survives a content control when at least half of its amplitude is left; below "
    "half, content made most of it.",
)
POSITIONAL = _threshold(
    "unmasked_positional",
    0.1,
    "(0, inf)",
    "a fraction of the scores' RMS the metric must stay below: a negligible pattern",
    "13a (ours): the yardstick of 8a-8c and 6c (a pattern is not negligible at a tenth of the score RMS), "
    "applied to any positional structure, since a NoPE model without the mask has no position to encode.",
)
UNMASKED_NONRELATIVE = _threshold(
    "unmasked_nonrelative",
    0.1,
    "(0, inf)",
    "a fraction of the scores' RMS the metric must stay below: a negligible non-relative pattern",
    "13b (ours): 6c's threshold (the simulation's RoPE without the mask) for the trained RoPE model without it.",
)
UNMASKED_RATIO = _threshold(
    "unmasked_ratio",
    0.5,
    "(0, 1]",
    "a ratio of amplitudes (without the mask over with it) the metric must stay below",
    "13c (ours): taking the mask away removes at least half of the pattern the causal twin has.",
)
WINDOW_R = _threshold(
    "window_effect_r",
    0.5,
    "(-1, 1)",
    "a Pearson r across layers the metric must exceed",
    "10d (ours): the recursion predicts the window's marginal effect layer by layer when its prediction and the "
    "measurement share a quarter of their variance across layers (r > 0.5).",
)
WINDOW_SIGNS = _threshold(
    "window_sign_excess",
    0.0,
    "[0, 1)",
    "a share of layers the metric must exceed: >= 0, better than a constant",
    "10e (ours): the recursion names the sign of the window's marginal effect in more layers than the best "
    "constant prediction (every layer the majority sign) does; the old 10e's 14 of 17 lost to a constant's 17.",
)

AMPLITUDE = "8b's metric: median over layers 2+ (paper) of the non-relative amplitude, keys >= 1, noise-floor corrected"
MODELS_UNCERTAINTY = (
    "a bootstrap over groups of sequences, drawn independently in each condition (different sequences), Student's "
    "t with G - 1 degrees of freedom; N = the sequences of each condition, equal across conditions, at one length"
)
TRAINED_UNCERTAINTY = (
    "a bootstrap over groups of sequences (G groups, t with G - 1 df) for each model; the training seed is one "
    "(N = 1 seed in the default run): the verdict is conditional on it, and says so"
)
WINDOW_UNCERTAINTY = (
    "a paired bootstrap over groups of the same sequences, extracted with the windows and with them lifted "
    "(the marginal effect is a difference of two differences on the same texts); t with G - 1 df"
)

# the registered claims the ledger measures now (catalogue.claims.CLAIMS and catalogue.thresholds take them from here,
# so a landed claim is its registration, word for word)
LANDED = ("10d", "10e", "12a", "12b")

# the claims whose ledger definitions a registration replaces, until it lands (then the old ones are gone): why each
# is replaced. 10d and 10e landed with target window_control (the old: the change past the window had no reference
# without the window; Gemma-3's global layers fall past 512 as the sliding ones do, so layer types compared within one
# extraction do not isolate the window).
REPLACES: dict[str, str] = {}

REGISTRATIONS = {
    r.claim.id: r
    for r in (
        Registration(
            Claim(
                "12a",
                title="pattern survives content controls (ours)",
                section="ours (issue 43), tests 5.2's cause",
                statement="Ours: the non-relative pattern of pretrained RoPE LLMs is the causal mask's, not the "
                "content's: it keeps at least half of its amplitude on sequences that do not start at a document "
                "start (mid_document), on tokens drawn uniformly from the vocabulary (random_tokens) and on each "
                "document's tokens permuted (shuffled_documents), BOS kept in all",
                metric=f"{AMPLITUDE}, under the control / the same under documents",
                unit="ratio of amplitudes",
                direction=">",
                threshold=SURVIVAL.key,
                measured_by="causalpos.analysis.claims.mask_controls.claim12",
            ),
            SURVIVAL,
            expected="supported under every control: Section 5.2 and our simulations (claims 6a-6b: RoPE with the "
            "mask on Gaussian noise) put the pattern in the mask, which random tokens keep; a ratio below 0.5 "
            "would say content made most of it",
            family="12",
            rows="one per pretrained model and control condition",
            uncertainty=MODELS_UNCERTAINTY,
        ),
        Registration(
            Claim(
                "12b",
                title="first keys still emphasised under controls (ours)",
                section="ours (issue 43), tests 5.2's cause",
                statement='Ours: "This pattern non-uniformly emphasizes the first few keys" holds under each content '
                "control too (keys 1-4, key 0 apart)",
                metric="8d's metric (mean diagonal-normalised score of keys 1-4 / score SD, keys >= 1), median "
                "over layers 2+ (paper), under the control",
                unit="score SDs",
                direction=">",
                threshold="first_keys",
                measured_by="causalpos.analysis.claims.mask_controls.claim12",
            ),
            _threshold(  # 8d's, as it stands: 12b is 8d under the controls
                "first_keys",
                0.0,
                "[0, inf)",
                "a mean score in SDs the metric must exceed: >= 0, emphasised",
                '"emphasizes the first few keys": their mean diagonal-normalised score is above 0 (a sign claim).',
            ),
            expected="supported under every control, for the same reason as 12a",
            family="12",
            rows="one per pretrained model and control condition",
            uncertainty=MODELS_UNCERTAINTY,
        ),
        Registration(
            Claim(
                "13a",
                title="NoPE without the mask: no positional pattern (ours)",
                section="ours (issue 43), the trained counterpart of 6c",
                statement="Ours: a NoPE model trained without the causal mask (same size, data and steps; a "
                "masked-token objective) has no positional pattern in its mean scores: nothing in it tells "
                "positions apart",
                metric="positional amplitude: RMS over the off-diagonal pairs of positions >= 1 (both triangles; "
                "a BOS at 0 apart) of the mean score map minus its mean over them, over the score RMS, noise-floor "
                "corrected; median over layers 2+ (paper)",
                unit="fraction of score RMS",
                direction="<",
                threshold=POSITIONAL.key,
                measured_by="causalpos.analysis.claims.mask_controls.claim13",
            ),
            POSITIONAL,
            expected="supported: without the mask a NoPE model is permutation-equivariant, so its mean score map "
            "can vary with position only as far as the content of its blocks does (cut from a token stream, not "
            "at document starts)",
            family="13",
            rows="one for nope_bidirectional",
            uncertainty=TRAINED_UNCERTAINTY,
        ),
        Registration(
            Claim(
                "13b",
                title="RoPE without the mask: stays relative (ours)",
                section="ours (issue 43), the trained counterpart of 6c",
                statement="Ours, after the paper's \"such patterns do not appear without a causal mask (as in "
                'Transformer encoders; see Appendix Figure 10)": a RoPE model trained without the mask has a '
                "relative pattern only",
                metric=f"{AMPLITUDE} (lower triangle, as for the causal models)",
                unit="fraction of score RMS",
                direction="<",
                threshold=UNMASKED_NONRELATIVE.key,
                measured_by="causalpos.analysis.claims.mask_controls.claim13",
            ),
            UNMASKED_NONRELATIVE,
            expected="supported: RoPE alone is relative, and the mask is what Section 5.1 says bends it",
            family="13",
            rows="one for rope_bidirectional",
            uncertainty=TRAINED_UNCERTAINTY,
        ),
        Registration(
            Claim(
                "13c",
                title="the mask's share of the trained pattern (ours)",
                section="ours (issue 43), the trained counterpart of 6c",
                statement="Ours: taking the causal mask away from training removes most of the pattern its causal "
                "twin has (NoPE: the positional amplitude; RoPE: the non-relative amplitude)",
                metric="13a's (NoPE) or 13b's (RoPE) metric for the bidirectional twin / the same for the causal model",
                unit="ratio of amplitudes",
                direction="<",
                threshold=UNMASKED_RATIO.key,
                measured_by="causalpos.analysis.claims.mask_controls.claim13",
            ),
            UNMASKED_RATIO,
            expected="supported for both: the causal twins' patterns are the mask's",
            family="13",
            rows="one per pair (nope, rope)",
            uncertainty="the two models' bootstraps drawn independently; " + TRAINED_UNCERTAINTY,
        ),
        Registration(
            Claim(
                "10d",
                title="window: the recursion predicts its effect (ours)",
                section="ours (issues 25, 43), beyond 5.2",
                statement="Ours: the large-d recursion of Gemma-3's stack predicts, layer by layer, the window's "
                "marginal effect: the change of the non-relative amplitude from queries before 512 to queries "
                "after it with the sliding windows, minus the same change with every layer made global (an "
                "out-of-distribution control, the same 1,024-token sequences)",
                metric="Pearson r across layers 2+ (paper) between the recursion's marginal effect and the measured "
                "one (bands 1 .. w - 1, keys >= 1)",
                unit="r",
                direction=">",
                threshold=WINDOW_R.key,
                measured_by="causalpos.analysis.claims.large_d.claim10_windows",
            ),
            WINDOW_R,
            expected="open: the old 10d's sign agreement (14 of 17 layers) did not beat a constant, so we expect "
            "neither outcome; a correlation below 0.5 would say the recursion does not see the window",
            family="10 (window)",
            rows="one per sliding-window LLM (Gemma-3)",
            uncertainty=WINDOW_UNCERTAINTY,
        ),
        Registration(
            Claim(
                "10e",
                title="window: signs beyond a constant (ours)",
                section="ours (issues 25, 43), beyond 5.2",
                statement="Ours: the recursion names the sign of the window's marginal effect (10d) in more layers "
                "than the best constant prediction does",
                metric="share of layers 2+ (paper) whose measured marginal effect has the recursion's sign, minus "
                "the share that has the majority sign",
                unit="share of layers",
                direction=">",
                threshold=WINDOW_SIGNS.key,
                measured_by="causalpos.analysis.claims.large_d.claim10_windows",
            ),
            WINDOW_SIGNS,
            expected="open, as 10d; the constant baseline is reported beside it",
            family="10 (window)",
            rows="one per sliding-window LLM (Gemma-3)",
            uncertainty=WINDOW_UNCERTAINTY,
        ),
    )
}
