"""Where every result lives: the one place the rules, the CLI and the config helpers take paths from.

Every function takes the results folder (default "results"; the config's `results` key changes it) and returns a
path as a string; pass "{variant}" or "{model}" to get a rule's pattern. Logs and benchmarks go inside the results
folder too, so that two configs never share a file and a results folder is whole in itself.
Layers and positions inside the files are 0-based; see docs/results.md for the columns.
"""

from __future__ import annotations

from causalpos.catalogue.figures import ALL_LAYERS_FIGURE, CLAIMS_FIGURE
from causalpos.catalogue.tables import ACTIVATION_TABLES, SUMMARY_FILES

RESULTS = "results"
SNAPSHOT_FOLDER = "snapshots"  # a trained model's weight-only snapshots, inside its folder
EMERGENCE_TABLES = ("scores", "intermediates", "groups", "losses")  # rule emergence's tables per model
ABLATION_FILE = "pattern_ablation.parquet"  # a model's pattern ablation table, and every model's in summary/


def logs_dir(results: str = RESULTS) -> str:
    """One log per job, inside the results folder (each target's folder its own: paper_llms, seeds)."""
    return f"{results}/logs"


def log_file(name: str, results: str = RESULTS) -> str:
    """A rule's log, e.g. log_file("train/{model}.log")."""
    return f"{logs_dir(results)}/{name}"


def benchmarks_dir(results: str = RESULTS) -> str:
    """Snakemake's benchmark files of the expensive jobs, inside the results folder."""
    return f"{results}/benchmarks"


def documents(results: str = RESULTS) -> str:
    return f"{results}/data/documents.parquet"


def tokenizer_dir(results: str = RESULTS) -> str:
    return f"{results}/tokenizer"


def tokens_dir(results: str = RESULTS) -> str:
    return f"{results}/tokens"


def tokens_file(name: str, results: str = RESULTS) -> str:
    """blocks.json, train.npy, heldout.npy, snippets.npy or snippets.parquet"""
    return f"{tokens_dir(results)}/{name}"


def theory_table(results: str = RESULTS) -> str:
    return f"{results}/theory/layer2_scores.parquet"


def recursion_table(results: str = RESULTS) -> str:
    """The large-d recursion of every simulation variant (rule recursion), beside the closed forms."""
    return f"{results}/theory/recursion.parquet"


def recursion_benchmark(results: str = RESULTS) -> str:
    return f"{benchmarks_dir(results)}/recursion.tsv"


def simulation_table(variant: str, results: str = RESULTS) -> str:
    return f"{results}/simulation/{variant}.parquet"


def simulation_groups(variant: str, results: str = RESULTS) -> str:
    """The score sums per group of sample blocks (the claims' standard errors), beside the simulation table."""
    return f"{results}/simulation_groups/{variant}.parquet"


def model_dir(model: str, results: str = RESULTS) -> str:
    """A trained model's folder (or a seed run's, `nope_seed1`): model.safetensors, config.json, metrics.parquet,
    length_eval.parquet."""
    return f"{results}/models/{model}"


def model_file(model: str, name: str, results: str = RESULTS) -> str:
    return f"{model_dir(model, results)}/{name}"


def checkpoints_dir(results: str = RESULTS) -> str:
    return f"{results}/checkpoints"


def snapshot_dir(model: str, results: str = RESULTS) -> str:
    """The snapshots of a trained model: one directory() output of rule train, whatever steps it holds.

    Files named by step would change with training.steps, and Snakemake checks params and code only for
    a job whose every output has its metadata: a target needing only the model was then called current."""
    return f"{model_dir(model, results)}/{SNAPSHOT_FOLDER}"


def snapshot_name(step: int) -> str:
    """The file of the snapshot after `step` optimizer steps, e.g. step_0000024.safetensors."""
    return f"step_{int(step):07d}.safetensors"


def snapshot_file(model: str, step: int, results: str = RESULTS) -> str:
    """The weights of a trained model after `step` optimizer steps (training.snapshot_steps)."""
    return f"{snapshot_dir(model, results)}/{snapshot_name(step)}"


def train_benchmark(model: str, results: str = RESULTS) -> str:
    return f"{benchmarks_dir(results)}/train/{model}.tsv"


def emergence_table(model: str, table: str, results: str = RESULTS) -> str:
    """results/emergence/{model}/{table}.parquet, table one of EMERGENCE_TABLES (the extraction at each snapshot)."""
    if table not in EMERGENCE_TABLES:
        raise ValueError(f"unknown emergence table {table!r}; known: {EMERGENCE_TABLES}")
    return f"{results}/emergence/{model}/{table}.parquet"


def emergence_tables(model: str, results: str = RESULTS) -> dict[str, str]:
    return {table: emergence_table(model, table, results) for table in EMERGENCE_TABLES}


def emergence_benchmark(model: str, results: str = RESULTS) -> str:
    return f"{benchmarks_dir(results)}/emergence/{model}.tsv"


def ablation_benchmark(job: str, results: str = RESULTS) -> str:
    """Snakemake's benchmark of a pattern ablation job (a model, or a model and seed as "{model}_seed{seed}")."""
    return f"{benchmarks_dir(results)}/pattern_ablation/{job}.tsv"


def seeds_dir(results: str = RESULTS) -> str:
    """The results of target length_seeds that summarise every training seed: its own summary/ and figures/, as
    paper_llms_dir's. The trainings with other seeds are models of their own (catalogue.models.seed_run:
    models/nope_seed1/)."""
    return f"{results}/seeds"


def pretrained_ablation(model: str, results: str = RESULTS) -> str:
    """A pretrained model's pattern ablation table (rule pattern_ablation_pretrained), beside its extraction's."""
    return f"{results}/activations/{model}/{ABLATION_FILE}"


def pretrained_dir(model: str, results: str = RESULTS) -> str:
    """A GGUF model dequantised into a safetensors folder."""
    return f"{results}/pretrained/{model}"


def activation_table(model: str, table: str, results: str = RESULTS) -> str:
    """results/activations/{model}/{table}.parquet, table one of tables.ACTIVATION_TABLES"""
    if table not in ACTIVATION_TABLES:
        raise ValueError(f"unknown activation table {table!r}; known: {ACTIVATION_TABLES}")
    return f"{results}/activations/{model}/{table}.parquet"


def activation_tables(model: str, results: str = RESULTS) -> dict[str, str]:
    return {table: activation_table(model, table, results) for table in ACTIVATION_TABLES}


def extraction_state_dir(model: str, results: str = RESULTS) -> str:
    """Where a running extraction keeps its restart state (removed once its tables are written)."""
    return f"{checkpoints_dir(results)}/extract/{model}"


def paper_llms_dir(results: str = RESULTS) -> str:
    """Target paper_llms's own results folder: the functions here, given it as `results`, name its files
    (activations, figures, summary), so nothing it writes clashes with the default run's."""
    return f"{results}/paper_llms"


def summary_dir(results: str = RESULTS) -> str:
    return f"{results}/summary"


def summary_tables(results: str = RESULTS) -> list[str]:
    """The per-layer summary tables (tables.SUMMARY_FILES)."""
    return [f"{summary_dir(results)}/{name}" for name in SUMMARY_FILES.values()]


def summary_file(name: str, results: str = RESULTS) -> str:
    """claims.parquet, claims.md, convergence.parquet, heads.parquet, runtimes.parquet, runtimes.html, config.html"""
    return f"{summary_dir(results)}/{name}"


def heads_benchmark(results: str = RESULTS) -> str:
    """Snakemake's benchmark of rule heads (results/summary/heads.parquet: every head of every model)."""
    return f"{benchmarks_dir(results)}/heads.tsv"


def figure_files(stem: str, formats, results: str = RESULTS) -> list[str]:
    """One figure in every format, e.g. figure_files("fig02_l2norm", ["pdf", "png"])."""
    return [f"{results}/figures/{stem}.{fmt}" for fmt in formats]


def all_layers_dir(model: str, results: str = RESULTS) -> str:
    """The folder of one model's fig_all_layers pages (rule model_figure's directory() output)."""
    return f"{results}/figures/{ALL_LAYERS_FIGURE}_{model}"


def claims_dir(results: str = RESULTS) -> str:
    """The folder of figL1_claims's pages (rule claims's outputs, one file per page and format: see
    figures.registry.claims_pages)."""
    return f"{results}/figures/{CLAIMS_FIGURE}"
