"""Every table the pipeline writes, as one record each: where it lives, its columns in order, what it and each
column mean; Figure 3's stage labels; and the one column check.

A Table's `path` is relative to the results folder, with its wildcards in braces (`simulation/{variant}.parquet`);
causalpos.catalogue.paths builds the files from it. `columns` are what the stage's code makes, in order: the
writers build their frames with them and the readers check them (`require_columns`); docs/results.md shows them
(scripts/generate-docs.py). Layers and positions are 0-based in every table; heatmap tables are long, one row
per visible (query_pos, key_pos). The column meanings are in columns.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from causalpos.catalogue.columns import (
    ABLATION,
    ACTIVATION,
    BLOCKS,
    CLAIMS,
    CONVERGENCE,
    DOCUMENTS,
    EMERGENCE,
    HEADS,
    INCREASING,
    LENGTH_SEEDS,
    MASK_CONTROLS,
    NONRELATIVENESS,
    PROBE_SUMMARY,
    RECURSION,
    RUNTIMES,
    SIMULATION,
    VARIANT_COLUMNS,
    WINDOW_TEST,
    meanings,
)

TABLE_COLUMN = "table"  # the column naming its own table, last in the extraction's and emergence's files


@dataclass(frozen=True)
class Table:
    """One table: `name` (the key of TABLES, the name figures and stages give it), `path` (a pattern relative to
    the results folder), `columns` (in order, as its builder makes them), `meaning` (one line),
    `column_meanings` (column -> one line, for the docs; columns.py); `tagged`: the file also ends with a `table` column
    holding the table's kind (the extraction's five tables and their snapshots under emergence/)."""

    name: str
    path: str
    columns: tuple[str, ...]
    meaning: str
    column_meanings: dict
    tagged: bool = False

    @property
    def filename(self) -> str:
        """The file's name: what it is called in any folder (a seed's, paper_llms's)."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def file_columns(self) -> tuple[str, ...]:
        """The columns of the file on disk: `columns`, then `table` where tagged."""
        return self.columns + ((TABLE_COLUMN,) if self.tagged else ())

    @property
    def wildcards(self) -> tuple[str, ...]:
        """The wildcards of `path`, in order: ("variant",), ("model",) or ()."""
        return tuple(part.split("}", 1)[0] for part in self.path.split("{")[1:])


def _table(name: str, path: str, meaning: str, columns, own: dict | None = None, tagged: bool = False) -> Table:
    """A Table whose column meanings are `own`'s, else columns.COMMON's (every column must have one)."""
    columns = tuple(columns)
    found = meanings(columns, own or {})
    if tagged:
        found[TABLE_COLUMN] = f"`{name.removeprefix('emergence_')}`: the table's own name"
    return Table(name, path, columns, meaning, found, tagged)


# ---------------------------------------------------------------- the column lists: what the builders make

# results/simulation/{variant}.parquet: measured columns, then the Variant fields (the last two sampler, window)
SIMULATION_COLUMNS = [
    "variant",
    "layer",
    "query_pos",
    "key_pos",
    "score_mean",
    "score_sem",
    "score_diagnorm",
    "prob_mean",
    "prob_sem",
]
SIMULATION_GROUP_COLUMNS = ["variant", "layer", "group", "n_samples", "seq_len", "sums"]
THEORY_COLUMNS = ["alpha", "residual", "seq_len", "query_pos", "key_pos", "score", "g", "h_query", "h_key"]
# then the Variant fields as in the simulation tables
RECURSION_COLUMNS = [
    "variant",
    "layer",
    "query_pos",
    "key_pos",
    "score",
    "score_diagnorm",
    "prob",
    "concentrates",
    "corrected",
    "score_corrected",
    "score_diagnorm_corrected",
    "prob_corrected",
]
DOCUMENT_COLUMNS = ["doc_id", "source", "split", "text"]
SNIPPET_COLUMNS = ["row", "doc_id", "n_doc_tokens"]
# tokens/blocks.json, read as a one-row table (causalpos.io.read_table: nested keys joined by dots, after the others)
BLOCK_COLUMNS = [
    "block_len",
    "dtype",
    "vocab_size",
    "eos_token_id",
    "train_unigram_entropy",
    "heldout_unigram_cross_entropy",
    *(
        f"splits.{split}.{key}"
        for split in ("train", "heldout")
        for key in ("n_documents", "n_stream_tokens", "n_blocks", "n_tokens")
    ),
]
METRIC_COLUMNS = ["model", "step", "tokens_seen", "train_loss", "heldout_loss", "lr"]
# a training run's speed, kept apart from its results (paths.train_throughput): the same run on another machine
# has the same metrics.parquet, and a lost timing never reruns the training
THROUGHPUT_COLUMNS = ["model", "step", "tokens_seen", "tokens_per_s"]
LENGTH_EVAL_COLUMNS = ["model", "factor", "seq_len", "n_sequences", "heldout_loss", "heldout_loss_sem"]
ABLATION_COLUMNS = [
    "model",
    "kind",
    "seed",
    "factor",
    "seq_len",
    "condition",
    "n_sequences",
    "n_estimate",
    "loss",
    "loss_sem",
    "delta",
    "delta_sem",
    "gap",
    "gap_sem",
    "effect",
    "effect_sem",
    "bias_rms",
]
# the extraction's tables, results/activations/{model}/{table}.parquet
SCORE_COLUMNS = [
    "model",
    "kind",
    "layer",
    "query_pos",
    "key_pos",
    "score_mean",
    "score_sem",
    "score_diagnorm",
    "n_sequences",
    "seq_len",
]
INTERMEDIATE_COLUMNS = ["model", "layer", "stage", "query_pos", "key_pos", "value", "n_sequences", "seq_len"]
PROBE_COLUMNS = ["model", "kind", "layer", "mae", "mae_baseline", "n_train", "n_test", "seq_len"]
GROUP_COLUMNS = ["model", "kind", "quantity", "stage", "layer", "group", "n_sequences", "seq_len", "sums"]
HEAD_SCORE_COLUMNS = ["model", "kind", "layer", "head", "query_pos", "key_pos", "score_mean", "n_sequences", "seq_len"]
STEP_COLUMNS = ["step", "tokens_seen"]  # added to an extraction table at each snapshot (rule emergence)
LOSS_COLUMNS = ["model", "step", "tokens_seen", "heldout_loss", "source"]
EMERGENCE_COLUMNS = [
    "model",
    "step",
    "tokens_seen",
    "layer",
    "stage",
    "metric",
    "value",
    "uncertainty",
    "reference",
    "reference_uncertainty",
]
# rule summary's tables
NONRELATIVENESS_COLUMNS = [
    "model",
    "kind",
    "layer",
    "seq_len",
    "n_sequences",
    "n_pairs",
    "left_keys",
    "index",
    "index_no_sink",
    "index_noise",
    "index_noise_no_sink",
    "deficit",
    "deficit_no_sink",
    "score_std",
    "score_q01",
    "score_q99",
    "pattern_std",
    "pattern_q01",
    "pattern_q99",
]
INCREASING_COLUMNS = [
    "model",
    "kind",
    "layer",
    "seq_len",
    "n_pairs",
    "fraction",
    "fraction_sem",
    "n_pairs_no_sink",
    "fraction_no_sink",
    "fraction_no_sink_sem",
    "n_pairs_with_diagonal",
    "fraction_with_diagonal",
    "fraction_with_diagonal_sem",
    "unresolved",
    "mean_step",
]
PROBE_SUMMARY_COLUMNS = ["model", "kind", "layer", "mae", "mae_baseline", "ratio", "n_train", "n_test", "seq_len"]
HEADS_COLUMNS = ["model", "kind", "layer", "head", "metric", "value", "seq_len", "n_sequences"]
# the claims ledger: LEDGER_COLUMNS, then EXTRA_COLUMNS (claim 7's first-keys sweep: value_keys_from{k} and
# uncertainty_keys_from{k} for k in claims.model_claims.KEY_SWEEP but the verdict's)
LEDGER_COLUMNS = [
    "claim_id",
    "section",
    "statement",
    "setting",
    "metric",
    "value",
    "uncertainty",
    "threshold",
    "verdict",
    "row_kind",  # catalogue.readings: test, exact, agreement, by construction, decision
    "reference",  # what the p's are referred to: normal, t(df), bootstrap bound, exact, none
    "ours",  # why the row is our reading and not the paper's ("" for the paper's)
]
EXTRA_COLUMNS = [
    "p_value",
    "p_adjusted",
    "p_against",
    "p_against_adjusted",
    "exact",
    "claim",
    "title",
    "direction",
    "unit",
    "alpha",
    "model",
    "layer",
    "label",
    "note",
    "value_with_sink",
    "uncertainty_with_sink",
    "left_deficit",
    "left_deficit_uncertainty",
    "range_ratio",
    "range_ratio_uncertainty",
    "sink_emphasis",
    "sink_emphasis_uncertainty",
    "value_keys_from0",
    "uncertainty_keys_from0",
    "value_keys_from5",
    "uncertainty_keys_from5",
    "value_keys_from16",
    "uncertainty_keys_from16",
    "compared_claim",
    "official_value",
    "official_uncertainty",
    "official_verdict",
    "exact_value",
    "exact_uncertainty",
    "exact_verdict",
    "law_change",
    "law_change_uncertainty",
]
CONVERGENCE_COLUMNS = [
    "model",
    "n_sequences",
    "claim_id",
    "layer",
    "value",
    "uncertainty",
    "verdict",
    "p_value",
    "p_adjusted",
    "p_against",
    "p_against_adjusted",
    "n_groups",
    "seq_len",
    "threshold",
    "direction",
    "alpha",
]
MASK_CONTROLS_COLUMNS = [
    "model",
    "condition",
    "layer",
    "head",
    "metric",
    "value",
    "uncertainty",
    "n_sequences",
    "seq_len",
]
WINDOW_TEST_COLUMNS = [
    "model",
    "source",
    "arm",
    "seq_len",
    "n_sequences",
    "n_groups",
    "layer",
    "layer_type",
    "window",
    "rope_theta",
    "region",
    "query_from",
    "query_to",
    "n_pairs",
    "measured",
    "uncertainty",
    "predicted",
    "predicted_seq_len",
    "replicates",
]
RUNTIME_COLUMNS = ["rule", "job", "seconds", "max_rss_mb", "cpu_seconds", "device", "source"]
# the tests of the paired NoPE - RoPE gap difference (analysis.lengths), NaN outside the pair rows beyond 1x
PAIR_TEST_COLUMNS = [
    "diff_ci_low",
    "diff_ci_high",
    "t_stat",
    "t_p",
    "exact_p",
    "exact_p_one_sided",
    "exact_p_adjusted",
    "n_negative",
    "n_ties",
    "sign_p",
    "sign_p_one_sided",
    "reading",
]
LENGTH_SEED_COLUMNS = [
    "model",
    "factor",
    "seq_len",
    "n_seeds",
    "seeds",
    "heldout_loss_mean",
    "heldout_loss_sd",
    "gap_mean",
    "gap_sd",
    "gap_sem",
    *PAIR_TEST_COLUMNS,
]

VARIANT_FIELDS = list(VARIANT_COLUMNS)  # simulation.variant.Variant's fields, the tables' last columns


# ---------------------------------------------------------------- the records


ACTIVATION_TABLES = ("scores", "intermediates", "probe", "groups", "head_scores")  # the extraction's, per model
SNAPSHOT_TABLES = ("scores", "intermediates", "groups")  # the extraction's tables rule emergence keeps per snapshot
EMERGENCE_TABLES = SNAPSHOT_TABLES + ("losses",)  # rule emergence's tables per model: emergence_<name> in TABLES
SUMMARY_TABLES = ("nonrelativeness", "increasing_fraction", "position_probe")  # rule summary's per-layer tables


def _records() -> list[Table]:
    activation = {
        "scores": (
            "q.k / sqrt(d) of every layer (after RoPE where there is RoPE), mean over sequences and heads",
            SCORE_COLUMNS,
        ),
        "intermediates": (
            "Figure 3's intermediates (a)-(i), layer 1 into layer 2, as Gram matrices",
            INTERMEDIATE_COLUMNS,
        ),
        "probe": ("a ridge probe of the token position from each hidden state, on held-out sequences", PROBE_COLUMNS),
        "groups": (
            "the sums behind the means, per group of sequences: the ledger's bootstrap over sequences",
            GROUP_COLUMNS,
        ),
        "head_scores": (
            "each query head's mean score over sequences (extraction.per_head; no rows where it is off)",
            HEAD_SCORE_COLUMNS,
        ),
    }
    ablation = (
        "the held-out loss with each layer's non-relative pattern subtracted from its logits, and the "
        "controls (models.pattern_ablation)"
    )
    records = [
        _table(
            "simulation",
            "simulation/{variant}.parquet",
            "Monte Carlo scores of one simulation variant",
            SIMULATION_COLUMNS + VARIANT_FIELDS,
            SIMULATION,
        ),
        _table(
            "simulation_groups",
            "simulation_groups/{variant}.parquet",
            "the score sums per group of sample blocks, per layer: the claims' standard errors",
            SIMULATION_GROUP_COLUMNS,
            SIMULATION,
        ),
        _table(
            "theory",
            "theory/layer2_scores.parquet",
            "the closed forms: Eq. 4's layer-2 scores with g and h, with and without the residual",
            THEORY_COLUMNS,
            SIMULATION,
        ),
        _table(
            "recursion",
            "theory/recursion.parquet",
            "the large-d recursion of every simulation variant, every layer (simulation.recursion)",
            RECURSION_COLUMNS + VARIANT_FIELDS,
            RECURSION,
        ),
        _table(
            "documents",
            "data/documents.parquet",
            "the corpus, every document with its split",
            DOCUMENT_COLUMNS,
            DOCUMENTS,
        ),
        _table(
            "snippets",
            "tokens/snippets.parquet",
            "the held-out documents of the evaluation snippets (tokens/snippets.npy), row by row",
            SNIPPET_COLUMNS,
            DOCUMENTS,
        ),
        _table(
            "blocks",
            "tokens/blocks.json",
            "the token blocks' sizes and unigram baselines (a JSON object, read as one row)",
            BLOCK_COLUMNS,
            BLOCKS,
        ),
        _table("metrics", "models/{model}/metrics.parquet", "a trained model's training curve", METRIC_COLUMNS),
        _table(
            "length_eval",
            "models/{model}/length_eval.parquet",
            "a trained model's held-out loss at multiples of its training length",
            LENGTH_EVAL_COLUMNS,
        ),
        _table(
            "pattern_ablation",
            "models/{model}/pattern_ablation.parquet",
            f"a trained model's pattern ablation: {ablation}",
            ABLATION_COLUMNS,
            ABLATION,
        ),
        _table(
            "pattern_ablation_pretrained",
            "activations/{model}/pattern_ablation.parquet",
            "a pretrained model's pattern ablation, at its extraction's length",
            ABLATION_COLUMNS,
            ABLATION,
        ),
        _table(
            "pattern_ablation_summary",
            "summary/pattern_ablation.parquet",
            "every model's pattern ablation in one table (under seeds/summary/: every training seed)",
            ABLATION_COLUMNS,
            ABLATION,
        ),
        *(
            _table(name, f"activations/{{model}}/{name}.parquet", meaning, columns, ACTIVATION, tagged=True)
            for name, (meaning, columns) in activation.items()
        ),
        *(
            _table(
                f"emergence_{name}",
                f"emergence/{{model}}/{name}.parquet",
                f"the extraction's {name} table at every snapshot of a trained model",
                activation[name][1] + STEP_COLUMNS,
                {**ACTIVATION, **EMERGENCE},
                tagged=True,
            )
            for name in SNAPSHOT_TABLES
        ),
        _table(
            "emergence_losses",
            "emergence/{model}/losses.parquet",
            "the held-out loss at every snapshot",
            LOSS_COLUMNS,
            EMERGENCE,
            tagged=True,
        ),
        _table(
            "emergence",
            "summary/emergence.parquet",
            "claim 7's metrics, the non-relative amplitude and the held-out loss at every snapshot, both models",
            EMERGENCE_COLUMNS,
            EMERGENCE,
        ),
        _table(
            "nonrelativeness",
            "summary/nonrelativeness.parquet",
            "how far each layer's scores are from a relative pattern (analysis.summary.nonrelativeness)",
            NONRELATIVENESS_COLUMNS,
            NONRELATIVENESS,
        ),
        _table(
            "increasing_fraction",
            "summary/increasing_fraction.parquet",
            "how often a nearer key scores higher, per layer (analysis.summary.increasing_fraction)",
            INCREASING_COLUMNS,
            INCREASING,
        ),
        _table(
            "position_probe",
            "summary/position_probe.parquet",
            "the position probe per hidden state, against its baseline (analysis.summary.probe_summary)",
            PROBE_SUMMARY_COLUMNS,
            {**ACTIVATION, **PROBE_SUMMARY},
        ),
        _table(
            "heads",
            "summary/heads.parquet",
            "each attention head's non-relative amplitude and first-key emphasis (analysis.heads)",
            HEADS_COLUMNS,
            HEADS,
        ),
        _table(
            "claims",
            "summary/claims.parquet",
            "the claims ledger: one row per claim and setting",
            LEDGER_COLUMNS + EXTRA_COLUMNS,
            CLAIMS,
        ),
        _table(
            "convergence",
            "summary/convergence.parquet",
            "claim 8 of each pretrained model on the first groups of its sequences",
            CONVERGENCE_COLUMNS,
            {**CLAIMS, **CONVERGENCE},
        ),
        _table(
            "window_test",
            "summary/window_test.parquet",
            "sliding-window layers before and after the window, measured and predicted by the recursion",
            WINDOW_TEST_COLUMNS,
            WINDOW_TEST,
        ),
        _table(
            "mask_controls",
            "summary/mask_controls.parquet",
            "claim 8's metrics of each pretrained model on the content controls' sequences (target mask_controls)",
            MASK_CONTROLS_COLUMNS,
            MASK_CONTROLS,
        ),
        _table(
            "runtimes", "summary/runtimes.parquet", "the run time of every expensive job", RUNTIME_COLUMNS, RUNTIMES
        ),
        _table(
            "environment",
            "summary/environment.parquet",
            "the software the run used, a row per package",
            ["name", "version"],
            {
                "name": "Python, the platform, causalpos, a package, or the GPU",
                "version": "its version (the GPU: its name; none where there is no GPU)",
            },
        ),
        _table(
            "length_seeds",
            "summary/length_seeds.parquet",
            "length generalisation over training seeds, and the tests of the paired NoPE - RoPE gap difference",
            LENGTH_SEED_COLUMNS,
            LENGTH_SEEDS,
        ),
    ]
    return records


TABLES: dict[str, Table] = {record.name: record for record in _records()}

# rule summary's tables by name -> their file name in results/summary/
SUMMARY_FILES = {name: TABLES[name].filename for name in SUMMARY_TABLES}


def table(name: str) -> Table:
    """The record of table `name`; ValueError naming the known ones."""
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r}; known: {sorted(TABLES)}")
    return TABLES[name]


# Figure 3's intermediates of layer l and l + 1: letter -> (plain label, the figure's panel title)
FIGURE3_STAGES = {
    "a": ("LN(X)", "(a) LN(X)"),
    "b": ("QK^T/sqrt(d)", r"(b) $QK^\top/\sqrt{d}$"),
    "c": ("AV", "(c) AV"),
    "d": ("AVW_O", r"(d) $AVW_O$"),
    "e": ("O = AVW_O + X", r"(e) $O = AVW_O + X$"),
    "f": ("LN(O)", "(f) LN(O)"),
    "g": ("X' = FFN(LN(O)) + O", r"(g) $X' = \mathrm{FFN}(\mathrm{LN}(O)) + O$"),
    "h": ("LN(X') (next layer)", r"(h) $\mathrm{LN}(X')$, next layer"),
    "i": ("QK^T/sqrt(d) (next layer)", r"(i) $QK^\top/\sqrt{d}$, next layer"),
}


def require_columns(
    frame: pd.DataFrame | None, columns, name: str, *, optional: bool = False, allow_empty: bool = False
) -> pd.DataFrame | None:
    """`frame` if it has every column of `columns`, else ValueError naming the table and the columns.

    A missing (None) or empty table is an error, unless `optional` (then None is returned for it) or,
    for an empty table only, `allow_empty`.
    """
    if frame is None or (frame.empty and not allow_empty):  # a DataFrame or an io.PartTable
        if optional:
            return None
        raise ValueError(f"the {name} table is {'missing' if frame is None else 'empty'}")
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise ValueError(f"the {name} table lacks column(s) {absent}")
    return frame
