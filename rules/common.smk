import os
import re
from pathlib import Path

import yaml

from causalpos.catalogue import paths
from causalpos.catalogue import figures as figure_paths
from causalpos.catalogue.claims import ledger_pages
from causalpos.catalogue.figures import (
    ABLATION_FIGURE,
    ALL_LAYERS_FIGURE,
    ALL_LAYERS_PAGE,
    CLAIMS_FIGURE,
    CLAIMS_PAGE,
    CONVERGENCE_FIGURE,
    FIGURE_CAPTIONS,
    FIGURES as FIGURE_SPECS,
    LENGTH_SEEDS_FIGURE,
    MASK_CONTROLS_FIGURE,
    claims_pages,
)
from causalpos.catalogue.models import (
    CONTROL_CONDITIONS,
    DOCUMENTS,
    TRAINED,
    WINDOW_ARMS,
    TRAINED_RUNS,
)
from causalpos.workflow import settings
from causalpos.workflow.config import check_duplicate_keys, validate_config
from causalpos.workflow.costs import check_costs
from causalpos.workflow.digest import code_digest
from causalpos.workflow.provenance import Provenance
from causalpos.workflow.user_errors import stop_on_user_error
from snakemake import io as snakemake_io  # a line opening with `report` is a directive

# Snakemake's own validate (inside) against the JSON schema, plus cross-key checks; a bad config stops here, before
# any job, naming the key. YAML keeps the last of two equal keys silently, so the files are read again for those.
# `device: cuda` is checked in onstart (below), only where jobs run here: not on a SLURM login node, nor inside each
# SLURM job, nor in a dry run (-n), which plans a GPU config anywhere. A rejected config ends Snakemake with its
# message alone (stop_on_user_error).
for path in workflow.configfiles:
    stop_on_user_error(check_duplicate_keys, path)
stop_on_user_error(validate_config, config, devices=False)

# ---- what the config names
RESULTS = settings.results_dir(config)  # every result, log and benchmark goes under it
PAPER = paths.paper_llms_dir(
    RESULTS
)  # target paper_llms: the pretrained LLMs at the paper's size
SEEDS = paths.seeds_dir(
    RESULTS
)  # target length_seeds: the summaries over every training seed
VARIANTS = list(config["simulation"]["variants"])
FIGURES = list(config["figures"])
FORMATS = list(config["plot"]["formats"])
PRETRAINED = settings.pretrained_models(config)
GGUF = settings.gguf_models(config)
EXTRACTED = list(TRAINED) + PRETRAINED
SNAPSHOTS = settings.snapshot_steps(
    config
)  # the steps of the trained models' weight-only snapshots
SEED_RUNS = settings.seed_runs(
    config
)  # (model, seed, run) of every training of target length_seeds
PAPER_FIGURES = settings.paper_llms_figures(config)
CONTROLS = {
    paths.controls_dir(condition, RESULTS): condition
    for condition in CONTROL_CONDITIONS
}  # each content control's extraction in a folder of its own (for mask_controls)
WINDOW_MODELS = settings.window_control_models(config)  # target window_control's models
WINDOWS_ROOT = paths.windows_root(RESULTS)  # target window_control: its window test
WINDOW_FOLDERS = {
    paths.window_control_dir(arm, RESULTS): arm for arm in WINDOW_ARMS
}  # each arm's extraction in a folder of its own (windows as trained, and lifted)
CONTROLS_ROOT = paths.controls_root(RESULTS)  # target mask_controls: claim 12's ledger
CONDITIONS = [
    DOCUMENTS,
    *CONTROLS.values(),
]  # the default run's sequences, then each control's
CLAIM_OF = {
    RESULTS: None,
    PAPER: 8,
    SEEDS: 11,
    CONTROLS_ROOT: 12,
}  # the ledger of a results folder: every claim, or one claim's rows


def one_of(names):
    """A regular expression matching exactly these names (none: nothing)."""
    return "|".join(map(re.escape, names)) or "(?!)"


wildcard_constraints:
    results=one_of(
        [
            RESULTS,
            PAPER,
            SEEDS,
            CONTROLS_ROOT,
            *CONTROLS,
            WINDOWS_ROOT,
            *WINDOW_FOLDERS,
        ]
    ),
    variant=one_of(VARIANTS),
    figure=one_of(FIGURES),


# the rules whose jobs run a module of causalpos.jobs (every rule but the targets)
JOB_RULES = sorted(
    path.stem
    for path in (Path(settings.__file__).parents[1] / "jobs").glob("*.py")
    if path.stem != "__init__"
)


# ---- the params every job carries, its code's digest and what its inputs were made from (workflow/provenance.py)
PROVENANCE = Provenance(workflow)


def code(rule):
    """The `code` param, the digest of the meaning of the code a job runs (causalpos.jobs.<rule>, its imports)."""
    return code_digest(rule)


def upstream(rule):
    """The `upstream` param: the digest of the params and code of every job above this one, read off the rules (by
    the rule's name in the workflow that runs it: causalpos_train where another workflow uses this one as a module).
    """
    name = workflow.modifier.modify_rulename(rule)
    return lambda wildcards: PROVENANCE.upstream(name, dict(wildcards.items()))


def lost(targets, full=False):
    """An input function of a target rule: the results `targets` rest on that are missing or damaged (these moved
    aside), so that their jobs run again and everything made from them follows (workflow.verify). `full` hashes
    every byte of every result (target verify); otherwise a result is read only where its size or mtime moved.
    """
    from snakemake.logging import logger
    from causalpos.workflow.verify import lost_results

    return lambda wildcards: lost_results(
        PROVENANCE, targets, full=full, say=logger.warning
    )


def log_path(name, results=RESULTS):
    """A job's log, inside its results folder: <results>/logs/<name>."""
    return paths.log_file(name, results)


# ---- resources: rules/resources.yaml, the one place local runs and the SLURM profile read them from
# (beside this file: also where another workflow uses this one as a module)
with open(
    os.path.join(
        workflow.current_basedir.get_path_or_uri(secret_free=True), "resources.yaml"
    )
) as fh:
    RESOURCES = yaml.safe_load(fh)
# what the largest jobs would need, against what they ask for: a config no job could run stops here (workflow.costs)
stop_on_user_error(
    check_costs, config, lambda rule: settings.job_request(RESOURCES, config, rule)
)


def job_threads(rule):
    return settings.job_request(RESOURCES, config, rule)["threads"]


def job_resources(rule):
    """A rule's resources (settings.job_request): mem_mb, runtime and, where its entry names a device key, gpu; a job
    of target paper_llms (its {results} is PAPER) those of its `paper_llms:` sizes."""
    default, paper = (
        settings.job_request(RESOURCES, config, rule, paper_llms=p)
        for p in (False, True)
    )
    keys = (
        ("mem_mb", "runtime", "gpu")
        if "gpu" in RESOURCES.get(rule, {})
        else ("mem_mb", "runtime")
    )
    return {
        key: (
            (
                lambda wildcards, key=key: (
                    paper[key] if wildcards.results == PAPER else default[key]
                )
            )
            if paper[key] != default[key]
            else default[key]
        )
        for key in keys
    }


# ---- outputs where the config decides
def snapshots_output():
    """Rule train's snapshots folder, where training.snapshot_steps asks for any."""
    return (
        {"snapshots": directory(paths.snapshot_dir("{model}", RESULTS))}
        if SNAPSHOTS
        else {}
    )


# ---- inputs where the config or a wildcard decides (the rules' named input functions)
def extraction_inputs(wildcards):
    """A trained model reads its weights and the evaluation snippets; a pretrained one the held-out documents, and its
    safetensors copy where it is a GGUF file."""
    if wildcards.model in TRAINED:
        return {
            "model": paths.model_file(wildcards.model, "model.safetensors", RESULTS),
            "tokens": paths.tokens_file("snippets.npy", RESULTS),
        }
    return pretrained_inputs(wildcards)


def pretrained_inputs(wildcards):
    return {
        "documents": paths.documents(RESULTS),
        **(
            {"model": paths.pretrained_dir(wildcards.model, RESULTS)}
            if wildcards.model in GGUF
            else {}
        ),
    }


def extraction_settings(wildcards):
    if wildcards.results == PAPER:
        return settings.paper_llms_settings(config, wildcards.model)
    if wildcards.results in WINDOW_FOLDERS:
        return settings.window_control_settings(
            config, wildcards.model, WINDOW_FOLDERS[wildcards.results]
        )
    if wildcards.results in CONTROLS:
        return settings.control_settings(
            config, wildcards.model, CONTROLS[wildcards.results]
        )
    return settings.extraction_settings(config, wildcards.model)


def control_tables(wildcards, tables=("scores", "groups", "head_scores"), prefix=""):
    """Each condition's tables (CONDITIONS, in order; `documents`: the default run's extraction), a file per
    pretrained model in each: what jobs.controls_table, and claim 12's ledger (prefix "control_"), read.
    """
    folders = [RESULTS, *CONTROLS]
    return {
        prefix
        + table: [
            paths.activation_table(model, table, folder)
            for folder in folders
            for model in PRETRAINED
        ]
        for table in tables
    }


def ablation_tables(wildcards):
    """The ablation tables of the summary: the default run's models (training.seed and every pretrained model), or in
    results/seeds every training seed's."""
    if wildcards.results == SEEDS:
        return [
            paths.table_file("pattern_ablation", RESULTS, model=run)
            for _, _, run in SEED_RUNS
        ]
    return [paths.table_file("pattern_ablation", RESULTS, model=m) for m in TRAINED] + [
        paths.pretrained_ablation(m, RESULTS) for m in PRETRAINED
    ]


def extraction_tables(models, results, tables=("scores", "intermediates", "groups")):
    return {
        table: [paths.activation_table(m, table, results) for m in models]
        for table in tables
    }


def summary_inputs(wildcards):
    """The scores and probes of every extracted model; in paper_llms's folder the pretrained LLMs'."""
    models = PRETRAINED if wildcards.results == PAPER else EXTRACTED
    return extraction_tables(models, wildcards.results, ("scores", "probe"))


def figure_inputs(wildcards):
    """The files a figure reads, by table (its record in catalogue.figures); in paper_llms's folder the pretrained
    models' alone."""
    return settings.figure_inputs(
        config, wildcards.figure, wildcards.results, wildcards.results == PAPER
    )


def claims_inputs(wildcards):
    """What a ledger reads: every result of the default run; claim 8's tables at the paper's size; claim 11's table
    over every training seed; claim 12's: every condition's scores and groups."""
    if wildcards.results == SEEDS:
        return {
            "pattern_ablation": [paths.table_file("pattern_ablation_summary", SEEDS)]
        }
    if wildcards.results == CONTROLS_ROOT:
        return control_tables(wildcards, ("scores", "groups"), prefix="control_")
    if wildcards.results == PAPER:
        return {
            **extraction_tables(PRETRAINED, PAPER),
            "convergence": [paths.table_file("convergence", PAPER)],
        }
    return {
        "simulations": [paths.simulation_table(v, RESULTS) for v in VARIANTS],
        "simulation_groups": [paths.simulation_groups(v, RESULTS) for v in VARIANTS],
        "theory": [paths.theory_table(RESULTS)],
        "recursion": [paths.recursion_table(RESULTS)],  # claim 10 (ours)
        **extraction_tables(EXTRACTED, RESULTS),
        # claim 8's verdicts as N grows: a flip is noted in the ledger
        "convergence": [paths.table_file("convergence", RESULTS)] if PRETRAINED else [],
        # claim 10d-10e (ours): the window's own effect in the sliding-window LLMs, from target window_control's
        # window test once it exists (settings.window_effect_table), else the default run's (no lifted arm: no verdict)
        "window_test": (
            [settings.window_effect_table(config, RESULTS)] if PRETRAINED else []
        ),
        # claim 11 (ours): the pattern ablation, one training seed here (every seed: target length_seeds)
        "pattern_ablation": [paths.table_file("pattern_ablation_summary", RESULTS)],
    }


def window_test_inputs(wildcards):
    """Each pretrained model's scores and groups tables, paper_llms's where they exist (settings.window_test_sources),
    and its safetensors copy where it is a GGUF file; in WINDOWS_ROOT (target window_control) its models' windowed
    arm, and the lifted arm's tables as lifted_scores and lifted_groups."""
    if wildcards.results == WINDOWS_ROOT:
        folders = {arm: paths.window_control_dir(arm, RESULTS) for arm in WINDOW_ARMS}
        return {
            prefix
            + table: [
                paths.activation_table(m, table, folders[arm]) for m in WINDOW_MODELS
            ]
            for arm, prefix in zip(WINDOW_ARMS, ("", "lifted_"))
            for table in settings.WINDOW_TEST_TABLES
        } | {
            "models": [
                paths.pretrained_dir(m, RESULTS) for m in WINDOW_MODELS if m in GGUF
            ]
        }
    sources = settings.window_test_sources(config, RESULTS)
    return {
        table: [
            paths.activation_table(m, table, folder) for m, folder in sources.items()
        ]
        for table in settings.WINDOW_TEST_TABLES
    } | {"models": [paths.pretrained_dir(m, RESULTS) for m in sources if m in GGUF]}


# ---- the report (snakemake --report)
# Snakemake 9's html_reporter shows a label other than the first as a toggle when it has exactly two values, each on
# half of a table's results, and only when no other label qualifies; the toggle starts on the first of its two values
# in JavaScript's sort order. So "format" is the one two-valued label of every table, and PNG's value sorts first: a
# figure opens as its PNG, fitted to the window, not as a PDF at 31-48% zoom. Other formats are vectors.
PNG_FORMAT_LABEL = "png"


def format_label(ext):
    """The report's "format" label of a figure file with extension `ext`: "png", or "vector pdf" / "vector svg",
    which sort after it."""
    return PNG_FORMAT_LABEL if ext == "png" else f"vector {ext}"


def figure_section(name, results=RESULTS):
    """The report's subcategory of a figure: the part of the paper it belongs to (paper_llms's apart)."""
    section = FIGURE_SPECS[name].section if name in FIGURE_SPECS else "Figures"
    return f"{section}, the paper's size (paper_llms)" if results == PAPER else section


def caption_of(figure):
    """The report caption file of a figure (its record's; the figures of rule figure share one that shows each one's
    caption)."""
    return "../" + (
        FIGURE_SPECS[figure].caption_file if figure in FIGURE_SPECS else FIGURE_CAPTIONS
    )


def report_figures(stem, results="{results}", category="Figures"):
    """One figure in every configured format, each shown in `snakemake --report` with its figure and format."""
    return [
        snakemake_io.report(
            path,
            caption=caption_of(stem),
            category=category,
            subcategory=lambda wildcards: figure_section(
                stem.format(**wildcards), wildcards.get("results", RESULTS)
            ),
            labels={"figure": stem, "format": format_label(path.rsplit(".", 1)[1])},
        )
        for path in paths.figure_files(stem, FORMATS, results)
    ]


def report_folder(folder, page, category, figure, labels):
    """A directory() output of a figure's pages, each page in the report with the labels the function gives."""
    return snakemake_io.report(
        directory(folder),
        patterns=[page],
        caption=caption_of(figure),
        category=category,
        subcategory=lambda wildcards: figure_section(
            figure, wildcards.get("results", RESULTS)
        ),
        labels=labels,
    )


# fig_all_layers' kinds in the report, in the order they sort (figures.activations.ALL_LAYERS_KINDS)
ALL_LAYERS_KIND_LABELS = {"raw": "attention scores", "diagnorm": "diagonal-normalised"}


def all_layers_labels(wildcards):
    """The report's labels of one page of fig_all_layers (the wildcards of ALL_LAYERS_PAGE): its model as people
    write it, the page (kind and layers) and the format. The report sorts a table's rows by their labels as strings,
    so the page label sorts by kind (attention scores first, as the paper's Figures 11-13 before 14-16), then by
    layer: numbers zero-padded to the widest in the model's folder (01-06, 07-12, 13-18). Kind and layers share one
    label: a label of its own with two values would be a second toggle beside "format", and the report then shows
    no toggle at all (see format_label)."""
    first, last = (int(layer) for layer in wildcards.layers.split("-"))
    width = all_layers_digits(wildcards.model, wildcards.get("results", RESULTS))
    return {
        "model": settings.model_labels(config).get(wildcards.model, wildcards.model),
        "page": f"{ALL_LAYERS_KIND_LABELS.get(wildcards.kind, wildcards.kind)}, "
        f"layers {first:0{width}d}-{last:0{width}d}",
        "format": format_label(wildcards.ext),
    }


def all_layers_digits(model, results):
    """Digits of the highest layer among a model's fig_all_layers pages on disk (at least 2, as in their file names):
    the report's labels are made after the run, from the pages found."""
    found = snakemake_io.glob_wildcards(
        os.path.join(figure_paths.all_layers_dir(model, results), ALL_LAYERS_PAGE)
    ).layers
    return max([2] + [len(layers.split("-")[1].lstrip("0")) for layers in found])


def claims_page_labels(wildcards):
    """The report's labels of one page of figL1_claims: the claims it shows, numbers zero-padded (the report sorts
    labels as strings: 01, 02-03, ..., 10, 11, not 1, 10, 11, 2-3), and its format."""
    return {
        "figure": CLAIMS_FIGURE,
        "claims": re.sub(
            r"\d+", lambda number: f"{int(number.group()):02d}", wildcards.claims
        ),
        "format": format_label(wildcards.ext),
    }


# ---- what the targets ask for
def all_simulations():
    return [paths.simulation_table(v, RESULTS) for v in VARIANTS]


def all_figure_files():
    return [
        path
        for figure in FIGURES
        for path in paths.figure_files(figure, FORMATS, RESULTS)
    ]


def paper_llms_outputs():
    """Every file of target paper_llms."""
    if not PRETRAINED:
        return []
    return (
        [
            paths.table_file("claims", PAPER),
            paths.summary_file("claims.md", PAPER),
            paths.table_file("convergence", PAPER),
        ]
        + [
            path
            for stem in PAPER_FIGURES + [CONVERGENCE_FIGURE]
            for path in paths.figure_files(stem, FORMATS, PAPER)
        ]
        + [figure_paths.claims_dir(PAPER)]
        + [figure_paths.all_layers_dir(model, PAPER) for model in PRETRAINED]
    )


# ---- the outputs of every rule, published to the jobs, which name the one that rebuilds a damaged input (workflow/job.py)
def publish_writers():
    """The outputs of every rule (a job names the one that rebuilds a damaged input), and the job module of every
    rule by its name in the workflow that runs it (another workflow's prefix, where this one is its module).
    """
    from causalpos.workflow.job import JOBS_ENV, WRITERS_ENV
    from causalpos.workflow.provenance import writer_patterns
    import json

    os.environ[WRITERS_ENV] = json.dumps(writer_patterns(workflow))
    jobs = json.loads(os.environ.get(JOBS_ENV) or "{}")
    jobs |= {workflow.modifier.modify_rulename(name): name for name in JOB_RULES}
    os.environ[JOBS_ENV] = json.dumps(jobs)


onstart:
    # the executor is known now, and a dry run never gets here
    if workflow.local_exec and workflow.is_main_process:
        from causalpos.workflow.config import check_devices

        stop_on_user_error(check_devices, config, config["training"])
    # Ctrl-C or SIGTERM to Snakemake also stop its running jobs (alone, it waits for them to end)
    from causalpos.workflow.job import forward_stop_signals

    forward_stop_signals(workflow.local_exec)
