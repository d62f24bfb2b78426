"""Claim 12 (ours, issue 43; registered before its numbers in catalogue.preregistered): is the non-relative pattern
of pretrained RoPE LLMs the causal mask's, or the content's?

Every sequence of Section 5.2's extraction starts at a document start, after BOS, so position-dependent content
(headlines, openings) could make a non-relative mean map with no help from the mask. The content controls
(corpus.conditions) keep BOS and the mask and take that content away: windows inside documents (mid_document),
tokens drawn uniformly from the vocabulary (random_tokens), each document's tokens permuted (shuffled_documents).
Each is measured by claim 8's own statistics (model_claims.layer_statistics), on its own extraction.

12a (per model and control): 8b's metric (the median over layers 2+ (paper) of the non-relative amplitude, keys >=
1, bias-corrected) under the control over the same under documents: > control_survival (0.5) = the pattern keeps
more than half of its amplitude without the documents' content. 12b (per model and control): 8d's metric (the
first keys' emphasis, keys 1-4, in score SDs), its median over layers 2+ (paper), under the control: > 0.

Uncertainty: each condition's bootstrap over its own groups of sequences, drawn independently of the others' (the
draws' seed joins the condition: LedgerInputs' `stream`; the documents' draws are the default ledger's, so 12a's
denominator is 8b's own); a ratio's replicate is the control's replicate over the documents' (independent draws:
for shuffled_documents, whose sequences are the documents' permuted, independent draws ignore a positive
correlation, so the SE is if anything too large). Student's t with G - 1 degrees of freedom, G the fewer groups of
the two. The rows are claim 12's Holm family (ledger.OWN_FAMILIES).
"""

from __future__ import annotations

from causalpos.analysis.claims.model_claims import later_layers_median, layer_statistics
from causalpos.analysis.claims.replicates import LedgerInputs, amplitude
from causalpos.analysis.claims.rows import absent_row, row
from causalpos.analysis.triangles import FIRST_KEYS, safe_ratio
from causalpos.catalogue.models import CONDITION_CODES, CONTROL_CONDITIONS, DOCUMENTS, PRETRAINED_KIND


def later_layer_measures(data: LedgerInputs, model: str) -> dict | None:
    """A model's 8b and 12b metrics on one condition's tables, [estimate, replicates...] each, with the layers they
    are the median of and the degrees of freedom of their SE; None where the condition has no scores of it."""
    amplitudes, emphases, df = {}, {}, None
    for layer, field, stats in layer_statistics(data, model):
        amplitudes[layer], emphases[layer], df = amplitude(stats["share1"]), stats["first1"], field.df
    amplitude_median = later_layers_median(amplitudes)
    if amplitude_median is None:
        return None
    later = [layer for layer in sorted(amplitudes) if layer >= 1]
    return {"amplitude": amplitude_median, "emphasis": later_layers_median(emphases), "later": later, "df": df}


def claim12(data: LedgerInputs, th: dict) -> list[dict]:
    """12a and 12b, a row per pretrained model and control condition; no rows without the controls' tables (the
    default run's ledger: claim 12 is target mask_controls's)."""
    if not data.controls:
        return []
    documents = data.controls.get(DOCUMENTS)
    models = sorted({m for inputs in data.controls.values() for m in inputs.models(PRETRAINED_KIND)})
    rows_a, rows_b = [], []
    if not models:
        why = "no pretrained model (kind pretrained) in the content controls' scores tables"
        return [absent_row("12a", th, why), absent_row("12b", th, why)]
    for model in models:
        reference = later_layer_measures(documents, model) if documents is not None else None
        for condition in CONTROL_CONDITIONS:
            inputs = data.controls.get(condition)
            measured = later_layer_measures(inputs, model) if inputs is not None else None
            label = f"{model} {CONDITION_CODES[condition]}"
            if measured is None or reference is None:
                why = f"no scores of {model} on {condition if measured is None else DOCUMENTS} (layers 2+)"
                rows_a.append(row("12a", label, None, th, note=why, label=label, model=model))
                rows_b.append(row("12b", label, None, th, note=why, label=label, model=model))
                continue
            layers = f"layers 2-{max(measured['later']) + 1} (paper)"
            dfs = [d for d in (measured["df"], reference["df"]) if d is not None]
            amplitude_here, amplitude_documents = measured["amplitude"], reference["amplitude"]
            rows_a.append(
                row(
                    "12a",
                    f"{model}, {condition} / {DOCUMENTS}, {layers}",
                    safe_ratio(amplitude_here, amplitude_documents),
                    th,
                    note=f"amplitude {amplitude_here[0]:.3g} ({condition}) over {amplitude_documents[0]:.3g} "
                    f"({DOCUMENTS}); independent bootstraps over each condition's groups of sequences",
                    label=label,
                    model=model,
                    df=min(dfs) if dfs else None,
                )
            )
            rows_b.append(
                row(
                    "12b",
                    f"{model}, {condition}, {layers}",
                    measured["emphasis"],
                    th,
                    note=f"keys 1-{FIRST_KEYS} (key 0 apart); {DOCUMENTS}: {reference['emphasis'][0]:+.3g}",
                    label=label,
                    model=model,
                    df=measured["df"],
                )
            )
    return rows_a + rows_b
