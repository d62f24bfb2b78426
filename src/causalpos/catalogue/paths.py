"""Where every result lives: the one place the rules, the CLI and the config helpers take paths from.

Every function takes the results folder (default "results"; the config's `results` key changes it) and returns a
path as a string; pass "{variant}" or "{model}" to get a rule's pattern. Logs and benchmarks go inside the results
folder too, so that two configs never share a file and a results folder is whole in itself.
Layers and positions inside the files are 0-based; see docs/results.md for the columns. The figures' folders
and inputs are catalogue.figures' (all_layers_dir, claims_dir, figure_inputs): this module does not import the
figure registry, so a figure's record or caption is not part of the code of the jobs that only need paths
(training, extraction, simulation).
"""

from __future__ import annotations

from causalpos.catalogue.models import TRAINED
from causalpos.catalogue.tables import ACTIVATION_TABLES, EMERGENCE_TABLES, SUMMARY_TABLES, TABLES, table

RESULTS = "results"
SNAPSHOT_FOLDER = "snapshots"  # a trained model's weight-only snapshots, inside its folder
# a model's pattern ablation table's file name, and every model's in summary/ (the same name in a seed's folder)
ABLATION_FILE = TABLES["pattern_ablation"].filename


class _Pattern(dict):
    """format_map's mapping that leaves a wildcard it is not given as it is: "{model}" stays "{model}"."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def table_file(name: str, results: str = RESULTS, **wildcards) -> str:
    """The file of table `name` (a key of catalogue.tables.TABLES) in `results`, its wildcards filled from
    `wildcards`; a wildcard left out stays a pattern: table_file("length_eval") is
    "results/models/{model}/length_eval.parquet", table_file("length_eval", model="nope") that of nope."""
    record = table(name)
    unknown = set(wildcards) - set(record.wildcards)
    if unknown:
        raise ValueError(f"table {name!r} ({record.path}) has no wildcard {sorted(unknown)}")
    return f"{results}/" + record.path.format_map(_Pattern({k: str(v) for k, v in wildcards.items()}))


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
    return table_file("documents", results)


def tokenizer_dir(results: str = RESULTS) -> str:
    return f"{results}/tokenizer"


def tokens_dir(results: str = RESULTS) -> str:
    return f"{results}/tokens"


def tokens_file(name: str, results: str = RESULTS) -> str:
    """blocks.json, train.npy, heldout.npy, snippets.npy or snippets.parquet"""
    return f"{tokens_dir(results)}/{name}"


def theory_table(results: str = RESULTS) -> str:
    return table_file("theory", results)


def recursion_table(results: str = RESULTS) -> str:
    """The large-d recursion of every simulation variant (rule recursion), beside the closed forms."""
    return table_file("recursion", results)


def recursion_benchmark(results: str = RESULTS) -> str:
    return f"{benchmarks_dir(results)}/recursion.tsv"


def simulation_table(variant: str, results: str = RESULTS) -> str:
    return table_file("simulation", results, variant=variant)


def simulation_groups(variant: str, results: str = RESULTS) -> str:
    """The score sums per group of sample blocks (the claims' standard errors), beside the simulation table."""
    return table_file("simulation_groups", results, variant=variant)


def model_dir(model: str, results: str = RESULTS) -> str:
    """A trained model's folder (or a seed run's, `nope_seed1`): its weights, config.json, and its tables (metrics,
    length_eval, pattern_ablation)."""
    return f"{results}/models/{model}"


def model_file(model: str, name: str, results: str = RESULTS) -> str:
    """A file of a trained model's folder by its name (a table's: table_file(name, results, model=model))."""
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


def train_throughput(model: str, results: str = RESULTS) -> str:
    """The tokens per second of each row of a training curve (catalogue.tables.THROUGHPUT_COLUMNS), beside the
    training job's benchmark: a timing, not a result, so no rule declares it."""
    return f"{benchmarks_dir(results)}/train/{model}.throughput.tsv"


def emergence_table(model: str, table: str, results: str = RESULTS) -> str:
    """results/emergence/{model}/{table}.parquet, table one of EMERGENCE_TABLES (the extraction at each snapshot)."""
    if table not in EMERGENCE_TABLES:
        raise ValueError(f"unknown emergence table {table!r}; known: {EMERGENCE_TABLES}")
    return table_file(f"emergence_{table}", results, model=model)


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
    return table_file("pattern_ablation_pretrained", results, model=model)


def pretrained_dir(model: str, results: str = RESULTS) -> str:
    """A GGUF model dequantised into a safetensors folder."""
    return f"{results}/pretrained/{model}"


def activation_table(model: str, table: str, results: str = RESULTS) -> str:
    """results/activations/{model}/{table}.parquet, table one of tables.ACTIVATION_TABLES"""
    if table not in ACTIVATION_TABLES:
        raise ValueError(f"unknown activation table {table!r}; known: {ACTIVATION_TABLES}")
    return table_file(table, results, model=model)


def activation_tables(model: str, results: str = RESULTS) -> dict[str, str]:
    return {table: activation_table(model, table, results) for table in ACTIVATION_TABLES}


def extraction_state_dir(model: str, results: str = RESULTS) -> str:
    """Where a running extraction keeps its restart state (removed once its tables are written)."""
    return f"{checkpoints_dir(results)}/extract/{model}"


def paper_llms_dir(results: str = RESULTS) -> str:
    """Target paper_llms's own results folder: the functions here, given it as `results`, name its files
    (activations, figures, summary), so nothing it writes clashes with the default run's."""
    return f"{results}/paper_llms"


def controls_root(results: str = RESULTS) -> str:
    """The folder of target mask_controls (issue 43): each control's extraction in a folder of its own
    (controls_dir) and, given it as `results`, claim 12's ledger (summary/claims.parquet ...)."""
    return f"{results}/controls"


def controls_dir(condition: str, results: str = RESULTS) -> str:
    """The folder of one content control's extraction (target mask_controls, issue 43): the functions here, given
    it as `results`, name its tables (activations/{model}/scores.parquet ...)."""
    return f"{controls_root(results)}/{condition}"


def windows_root(results: str = RESULTS) -> str:
    """The folder of target window_control (issue 43): each arm's extraction in a folder of its own
    (window_control_dir) and, given it as `results`, its window test (summary/window_test.parquet)."""
    return f"{results}/windows"


def window_control_dir(arm: str, results: str = RESULTS) -> str:
    """The folder of one arm of target window_control (issue 43; catalogue.models.WINDOW_ARMS): the functions
    here, given it as `results`, name its tables."""
    return f"{windows_root(results)}/{arm}"


def summary_dir(results: str = RESULTS) -> str:
    return f"{results}/summary"


def summary_tables(results: str = RESULTS) -> list[str]:
    """Rule summary's per-layer tables (tables.SUMMARY_TABLES)."""
    return [table_file(name, results) for name in SUMMARY_TABLES]


def summary_file(name: str, results: str = RESULTS) -> str:
    """A file of results/summary by its name: claims.md, runtimes.html, config.html (a table's:
    table_file(name, results), e.g. table_file("claims"))."""
    return f"{summary_dir(results)}/{name}"


def heads_benchmark(results: str = RESULTS) -> str:
    """Snakemake's benchmark of rule heads (results/summary/heads.parquet: every head of every model)."""
    return f"{benchmarks_dir(results)}/heads.tsv"


def figure_files(stem: str, formats, results: str = RESULTS) -> list[str]:
    """One figure in every format, e.g. figure_files("fig02_l2norm", ["pdf", "png"])."""
    return [f"{results}/figures/{stem}.{fmt}" for fmt in formats]
