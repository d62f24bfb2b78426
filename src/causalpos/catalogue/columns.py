"""What each column of the result tables means, one line each: the text of docs/results.md's column tables.

COMMON holds the columns many tables share; each family of tables has its own dict for the rest (and may say
more about a shared one). tables.py picks a table's meanings from its family, then from COMMON.
"""

from __future__ import annotations

COMMON = {
    "model": "the model's key: `nope`, `rope`, or a name under `extraction.pretrained.models`",
    "kind": "`trained` (our NoPE and RoPE decoders) or `pretrained`",
    "layer": "the layer, 0-based (the figures and the ledger say layer L + 1, as the paper does)",
    "query_pos": "the query's position, 0-based",
    "key_pos": "the key's position, 0-based (<= query_pos under the causal mask)",
    "seq_len": "tokens per sequence",
    "n_sequences": "the sequences measured",
    "variant": "the variant's name under `simulation.variants`",
    "step": "optimizer steps taken",
    "tokens_seen": "training tokens seen at that step",
    "heldout_loss": "mean next-token loss on held-out data (nats per token)",
    "heldout_loss_sem": "its standard error over the evaluated sequences",
    "train_loss": "mean training loss of the step (nats per token)",
    "lr": "the learning rate of the step",
    "value": "the measured value",
    "uncertainty": "its standard error: the SD of the bootstrap replicates",
    "stage": "Figure 3's stage, a-i (models.md)",
    "group": "the group's number",
    "factor": "the evaluation length over the training length (1, 2, 4)",
    "seed": "the training seed",
    "metric": "what `value` measures",
    "n_pairs": "the off-diagonal (query, key) pairs measured",
    "threshold": "the claim's threshold (catalogue.claims.THRESHOLDS, after the config's overrides)",
    "direction": "`>`, `<` or `>=`: the side of the threshold that supports the claim",
    "alpha": "the family-wise error rate of the verdicts (`claims.thresholds.family_alpha`)",
}

# the simulation.variant.Variant fields, in order: the variant parameters (docs/configuration.md), the last
# columns of the simulation and recursion tables; the config page shows these meanings too
VARIANT_COLUMNS = {
    "norm": "row-wise l2 normalisation (Eq. 1) or LayerNorm without affine parameters (Appendix B)",
    "scale": "scores q.k are divided by 1, sqrt(d) or d",
    "alpha": "expected inner product of two different input vectors",
    "pe": "RoPE applied to the normalised vectors (queries and keys; values unrotated)",
    "rope_theta": "RoPE base, 10000 in the paper",
    "mask": "decoder, or encoder (Figure 10)",
    "residual": "X' = AY + X, or X' = AY (Appendix A.2)",
    "d": "hidden size (even with RoPE)",
    "seq_len": "tokens",
    "n_layers": "layers",
    "n_samples": "Monte Carlo samples",
    "seed": "Monte Carlo seed",
    "sampler": "the input law as it ran: `official` (the paper's construction, Section 4.1) or `exact_full` / "
    "`exact_reduced` (our exact-moment law); the configured value (`exact` allowed) is in the file's "
    "metadata",
    "window": "sliding window, causal mask only: query i sees keys i - window < j <= i (Gemma's local layers); null: "
    "every key. A window >= seq_len hides nothing and is recorded as null (the unwindowed variant); the "
    "tables' `window` column is a nullable integer, empty for null",
}

SIMULATION = {
    **VARIANT_COLUMNS,
    "layer": "the layer, 0-based; one row per visible pair of every layer (a sliding window leaves out the pairs "
    "it hides)",
    "score_mean": "mean over the Monte Carlo samples of the score q.k (divided as `scale` says)",
    "score_sem": "its standard error",
    "score_diagnorm": "the score minus the mean of its diagonal, as plotted in Figures 4, 9, 10",
    "prob_mean": "mean attention probability",
    "prob_sem": "its standard error",
    "group": "a group of sample blocks: 32 runs of consecutive seeded blocks of 256 samples (fewer when N has "
    "fewer blocks)",
    "n_samples": "samples in the group",
    "sums": "the packed lower triangle of the group's score sums, diagonal included, row by row: pair (q, k) at "
    "q (q + 1) / 2 + k; `sums / n_samples` is the group's mean score matrix",
    "alpha": "the alpha of `theory.alphas`",
    "residual": "with the residual (g, h) or without (g', h', Appendix A.2)",
    "seq_len": "tokens",
    "query_pos": "the query's position, 0-based (the formulas are 1-based)",
    "score": "the layer-2 score of Eq. 4, g(i)/(h(i)h(j))",
    "g": "g(i) of the query",
    "h_query": "h(i)",
    "h_key": "h(j)",
}

RECURSION = {
    **SIMULATION,
    "score": "the score in the limit d -> infinity",
    "score_diagnorm": "the score minus the mean of its visible diagonal",
    "prob": "the attention probability in the limit",
    "concentrates": "false for LayerNorm with scale none or sqrt_d, whose scores do not concentrate as d grows (the "
    "softmax at the mean scores there: a heuristic, not a limit)",
    "corrected": "whether the finite-d correction was computed for the variant",
    "score_corrected": "the limit plus the O(1/d) correction at the variant's d (its `sampler` included); NaN where "
    "not computed: under RoPE and for LayerNorm with scale none or sqrt_d",
    "score_diagnorm_corrected": "the same for `score_diagnorm`",
    "prob_corrected": "the same for `prob`",
    "n_samples": "the variant's Monte Carlo samples (they do not enter the recursion)",
    "seed": "the variant's Monte Carlo seed (it does not enter the recursion)",
}

DOCUMENTS = {
    "doc_id": "`<source>:<number>`, unique",
    "source": "the source's name (`data.sources`)",
    "split": "`train` or `heldout`: a seeded hash of the text (`data.heldout_fraction`, `data.seed`)",
    "text": "the document",
    "row": "the snippet's row in snippets.npy",
    "n_doc_tokens": "the document's length in tokens",
}

BLOCKS = {
    "block_len": "tokens per block (`tokenizer.block_len`)",
    "dtype": "the token arrays' type (uint16, or uint32 above 65,536 tokens)",
    "vocab_size": "the tokenizer's vocabulary",
    "eos_token_id": "the token between documents",
    **{
        f"splits.{split}.{key}": f"{split} split: {meaning}"
        for split in ("train", "heldout")
        for key, meaning in (
            ("n_documents", "documents"),
            ("n_stream_tokens", "tokens of the stream doc EOS doc EOS"),
            ("n_blocks", "full blocks"),
            ("n_tokens", "n_blocks x block_len"),
        )
    },
    "train_unigram_entropy": "the unigram entropy of the train blocks (nats per token): a loss any model beats",
    "heldout_unigram_cross_entropy": "the held-out blocks' cross-entropy under the train unigram (nats per token)",
}

ABLATION = {
    "kind": "`trained` or `pretrained`",
    "seed": "the training seed; -1 for a pretrained model",
    "factor": "of the training length; 1 for a pretrained model",
    "condition": "what is subtracted from the attention logits: `none`, `pattern`, `shuffled`, `relative`, "
    "`pattern_sink` (models.md)",
    "n_sequences": "sequences evaluated",
    "n_estimate": "other sequences whose mean maps are subtracted",
    "loss": "mean next-token loss over the evaluated sequences",
    "loss_sem": "its standard error over sequences",
    "delta": "loss minus condition none's, paired by sequence",
    "delta_sem": "its standard error",
    "gap": "loss at the factor minus at 1x under the same condition, each long sequence paired with its blocks",
    "gap_sem": "its standard error",
    "effect": "gap minus the shuffled control's gap: claim 11's statistic for `pattern` (NaN at factor 1)",
    "effect_sem": "its standard error",
    "bias_rms": "the root mean square of what is subtracted",
}

ACTIVATION = {
    "score_mean": "q.k / sqrt(d), after RoPE where there is RoPE, mean over sequences and heads (head_scores: one "
    "head's; their mean over the heads is scores.parquet's)",
    "score_sem": "standard error over sequences",
    "score_diagnorm": "the score minus the mean of its diagonal",
    "stage": "Figure 3's stage a-i (models.md); in groups, the stage of an intermediate",
    "value": "the Gram matrix entry",
    "layer": "the layer, 0-based (probe: the hidden state, 0 = the embeddings)",
    "mae": "held-out mean absolute error of a ridge probe of the token position from the hidden state",
    "mae_baseline": "the same for always predicting the mean training position",
    "n_train": "token positions the probe was fitted on",
    "n_test": "token positions it was measured on",
    "quantity": "`scores` or `intermediate`",
    "group": "a contiguous group of whole batches of sequences (`extraction.bootstrap_groups`)",
    "sums": "float32 sums over the group's sequences of the lower triangle, row-major: index q(q+1)/2 + k",
    "head": "the query head, 0-based (grouped-query attention: query head h reads key head h // (heads / key heads))",
}

PROBE_SUMMARY = {"ratio": "mae / mae_baseline: 1 = no positional information"}

EMERGENCE = {
    "step": "the snapshot's optimizer steps (`training.snapshot_steps`)",
    "source": "`metrics`: the training's own evaluation at that step; `computed`: the same evaluation run on the "
    "snapshot",
    "stage": "f, i (Figure 3's stages); `scores` for a layer's scores; empty for the loss",
    "metric": "`concordance`, `nearer_key_advantage`, `strength_ratio`, `nonrelative_amplitude`, `heldout_loss` "
    "(analysis.emergence)",
    "uncertainty": "SD of the bootstrap over the extraction's groups, as in the ledger; none for the loss",
    "reference": "the alpha = 0 simulation's value of the same metric; 1 for the ratio",
    "reference_uncertainty": "its standard error",
}

NONRELATIVENESS = {
    "n_pairs": "off-diagonal pairs (those the layer sees)",
    "left_keys": "the keys of the left region: max(2, ceil(left_fraction x seq_len))",
    "index": "variance of the diagonal-normalised scores over that of the raw scores: 0 for a relative pattern",
    "index_no_sink": "the same over keys >= 1, bands recentred without key 0",
    "index_noise": "the index sampling noise alone would give",
    "index_noise_no_sink": "the same without key 0",
    "deficit": "the left-region deficit: mean diagonal-normalised score of the first keys (< 0: darker than their "
    "diagonals)",
    "deficit_no_sink": "the same without key 0",
    "score_std": "SD of the raw off-diagonal scores",
    "score_q01": "their 1% quantile",
    "score_q99": "their 99% quantile",
    "pattern_std": "SD of the diagonal-normalised scores",
    "pattern_q01": "their 1% quantile",
    "pattern_q99": "their 99% quantile",
}

INCREASING = {
    "n_pairs": "adjacent off-diagonal key steps",
    "fraction": "the fraction of them whose score grows toward the query",
    "fraction_sem": "its standard error",
    "n_pairs_no_sink": "the same steps without key 0",
    "fraction_no_sink": "their fraction growing",
    "fraction_no_sink_sem": "its standard error",
    "n_pairs_with_diagonal": "the steps with the diagonal",
    "fraction_with_diagonal": "their fraction growing",
    "fraction_with_diagonal_sem": "its standard error",
    "unresolved": "share of steps whose sign the data do not resolve",
    "mean_step": "the mean step",
}

HEADS = {
    "head": "the query head, 0-based",
    "metric": "`nonrelative_amplitude` (claim 8a's, per head: a point estimate, no bias correction) or "
    "`first_keys_emphasis` (claim 8d's mean diagonal-normalised score of keys 1-4, in score SDs)",
    "n_sequences": "the sequences measured",
}

CLAIMS = {
    "claim_id": "1a ... 11a (catalogue.claims.CLAIMS)",
    "section": "where the paper states it; `ours` for claims 10 and 11",
    "statement": "the claim in the paper's words",
    "setting": "the setting it is measured in",
    "metric": "what is measured",
    "value": "the measured value (variance shares bias-corrected)",
    "uncertainty": "one standard error",
    "verdict": "supported, not supported, inconclusive; `by construction` for a property of a formula, not a test",
    "row_kind": "test (a one-sided test, the only kind counted among the tests), exact, agreement (9a), by "
    "construction or decision (catalogue.readings)",
    "reference": "what the p's are referred to: normal, t(df) (a bootstrap over G groups of sequences: G - 1; "
    "training seeds: n - 1), bootstrap bound (replicates that never vary: p = 1 / (R + 1)), exact or none",
    "ours": "why the row is our reading and not the paper's (our setting, threshold or reading; our own "
    "claim): such rows are Holm-adjusted apart from the paper's; empty for the paper's",
    "p_value": "one-sided p of the claim",
    "p_adjusted": "Holm-adjusted over the family (the verdict compares it with `alpha`)",
    "p_against": "one-sided p of the other side",
    "p_against_adjusted": "Holm-adjusted",
    "exact": "a closed form or symbolic check: certain, p 0 or 1, outside the Holm family",
    "claim": "the claim's number, 1-11",
    "title": "a short title",
    "unit": "the metric's unit",
    "model": "the model measured (claims 7, 8, 11)",
    "layer": "the layer, 0-based (empty where the row is over layers)",
    "label": "a short label for plots",
    "note": "the variants or the source of the uncertainty; a claim 8 verdict that changes with N says so",
    "value_with_sink": "claim 8: the amplitude with the attention-sink key 0",
    "uncertainty_with_sink": "its standard error",
    "left_deficit": "claim 8: the left-region deficit",
    "left_deficit_uncertainty": "its standard error",
    "range_ratio": "claim 8: the 1%-99% range of the pattern over that of the scores",
    "range_ratio_uncertainty": "its standard error",
    "sink_emphasis": "claim 8d: the emphasis of key 0 alone",
    "sink_emphasis_uncertainty": "its standard error",
    **{
        f"{kind}_keys_from{k}": f"claim 7: the {what} with keys >= {k} (the verdict's: keys >= 1); NaN where too few "
        f"positions remain"
        for k in (0, 5, 16)
        for kind, what in (("value", "value"), ("uncertainty", "standard error"))
    },
    "compared_claim": "claim 9a: the claim whose verdicts it compares",
    "official_value": "9a: its value under the paper's construction",
    "official_uncertainty": "its standard error",
    "official_verdict": "its verdict",
    "exact_value": "9a: its value under our exact-moment law",
    "exact_uncertainty": "its standard error",
    "exact_verdict": "its verdict",
    "law_change": "9a: the value under our exact-moment law minus that under the paper's construction",
    "law_change_uncertainty": "its standard error (the two laws' Monte Carlo runs are independent)",
}

CONVERGENCE = {
    "n_sequences": "N, the sequences of the first groups",
    "claim_id": "8a-8d",
    "layer": "the layer, 0-based; empty for 8b and 8c, over the layers",
    "uncertainty": "bootstrap over those groups",
    "p_adjusted": "Holm over the claim 8 rows of that model at that N",
    "p_against_adjusted": "the same against",
    "n_groups": "how many first groups",
}

WINDOW_TEST = {
    "model": "a pretrained model with sliding-window layers (Gemma-3)",
    "source": "the tables read: target window_control's where both its arms exist, else `paper_llms` where they "
    "exist, else `default run`",
    "arm": "`windowed`: the model as trained; `lifted`: every layer global, each keeping its RoPE base (target "
    "window_control, the same sequences; an out-of-distribution control); `difference`: the `change` rows of "
    "`windowed` minus those of `lifted`, the window's own effect (paired: the same draws of the same groups)",
    "n_groups": "the groups of sequences the bootstrap draws (Student's t with n_groups - 1 degrees of freedom)",
    "layer_type": "`sliding` or `global`",
    "window": "the model's sliding window w",
    "rope_theta": "the layer's RoPE base",
    "region": "`before` (queries 0 .. w - 1), `after` (queries w .. 2w - 1), `change` (after - before); always over "
    "the bands 1 .. w - 1 and keys >= 1",
    "query_from": "the first query measured (inclusive)",
    "query_to": "the last query measured (inclusive)",
    "n_pairs": "the pairs measured (0 where seq_len <= w: no measured `after`)",
    "measured": "the non-relative amplitude (RMS of the scores minus their band means over the RMS of the scores, "
    "bias-corrected)",
    "uncertainty": "bootstrap over the groups of sequences",
    "predicted": "the same amplitude of the recursion of the model's stack (alpha 0, each layer's window and "
    "rope_theta, the head dimension as d)",
    "predicted_seq_len": "the positions of the prediction",
    "replicates": "the bootstrap values (the same draws for every layer)",
}

MASK_CONTROLS = {
    "model": "a pretrained LLM",
    "condition": "the sequences (corpus.conditions): `documents` (Section 5.2's, the default run's extraction), "
    "`mid_document`, `random_tokens` or `shuffled_documents`",
    "layer": "0-based; -1: the median over layers 2+ (paper) (8b, 8c)",
    "head": "the query head; -1: the mean map over heads (the ledger's claim 8)",
    "metric": "`nonrelative_amplitude` (8a; 8b at layer -1), `range_ratio` (8c), `first_keys_emphasis` (8d), "
    "`sink_emphasis` (8d's key 0)",
    "value": "claim 8's metric on this condition's sequences (analysis.controls_table)",
    "uncertainty": "bootstrap over the groups of sequences (one standard error); NaN for a head (no groups)",
    "n_sequences": "the sequences of the condition",
    "seq_len": "their length",
}

RUNTIMES = {
    "rule": "the rule",
    "job": "the job (its wildcards)",
    "seconds": "wall-clock seconds",
    "max_rss_mb": "peak memory (MB); empty for files written before the stages recorded it",
    "cpu_seconds": "CPU seconds; empty likewise",
    "device": "where it ran",
    "source": "`benchmark` (a Snakemake benchmark file), `stage metadata` (what a cached stage stored in its output) "
    "or `missing (no benchmark file)` (its benchmark file was deleted after the job ran: the times are empty)",
}

LENGTH_SEEDS = {
    "model": "`nope`, `rope`, or `nope - rope` (the two paired seed by seed)",
    "n_seeds": "the trainings (a pair row: the seeds both models have)",
    "seeds": "comma-separated: `training.seed` and `evaluation.seeds`",
    "heldout_loss_mean": "mean held-out loss over seeds (a pair row: of the paired difference)",
    "heldout_loss_sd": "its SD over seeds",
    "gap_mean": "mean gap to the training length (loss at the factor minus at 1x); a pair row: the paired mean "
    "difference d (< 0: NoPE loses less)",
    "gap_sd": "its SD over seeds",
    "gap_sem": "its standard error",
    "diff_ci_low": "95% confidence interval of the mean of d, low end (Student t, n - 1 degrees of freedom)",
    "diff_ci_high": "its high end",
    "t_stat": "paired t statistic",
    "t_p": "its two-sided p",
    "exact_p": "the exact sign-flip permutation test over all 2^n sign assignments, two-sided",
    "exact_p_one_sided": 'the same for "NoPE loses less"',
    "exact_p_adjusted": "`exact_p_one_sided` Holm-adjusted over the lengths beyond 1x",
    "n_negative": "seeds with d < 0",
    "n_ties": "seeds with d exactly 0 (left out of the sign test)",
    "sign_p": "exact binomial sign test, two-sided",
    "sign_p_one_sided": "the same, one-sided",
    "reading": "what the tests support, in words (analysis.lengths.reading)",
}


def meanings(columns, own: dict) -> dict:
    """Each column's meaning: `own`'s, else COMMON's; KeyError naming a column that has neither."""
    missing = [c for c in columns if c not in own and c not in COMMON]
    if missing:
        raise KeyError(f"no meaning for column(s) {missing}: add them to catalogue/columns.py")
    return {c: own.get(c) or COMMON[c] for c in columns}
