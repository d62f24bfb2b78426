import os
import re

from causalpos.catalogue.claims import ledger_pages
from causalpos.catalogue.figures import (
    ABLATION_FIGURE,
    ALL_LAYERS_FIGURE,
    ALL_LAYERS_PAGE,
    CLAIMS_FIGURE,
    CONVERGENCE_FIGURE,
    FIGURES as FIGURE_SPECS,
    LENGTH_SEEDS_FIGURE,
    claims_pages,
)
from causalpos.catalogue import paths
from causalpos.workflow import dag, provenance
from causalpos.workflow.config import (
    MODELS,
    check_devices,
    check_duplicate_keys,
    extracted_models,
    model_labels,
    paper_llms_figures,
    paper_llms_results,
    pretrained_models,
    results_dir,
    snapshot_steps,
    validate_config,
)
from causalpos.workflow.user_errors import stop_on_user_error
from snakemake import io as snakemake_io  # a line opening with `report` is a directive

# Snakemake's own validate (inside) against the JSON schema, plus cross-key
# checks; a bad config stops here, before any job, naming the key. YAML keeps
# the last of two equal keys silently, so the files are read again for those.
# `device: cuda` is checked in onstart (below), only where jobs run here: not on
# a SLURM login node, nor inside each SLURM job, nor in a dry run (-n), which
# plans a GPU config anywhere (while this file is read the executor is not known
# yet: workflow.local_exec is always True here).
# A rejected config ends Snakemake with its message alone (stop_on_user_error).
for path in workflow.configfiles:
    stop_on_user_error(check_duplicate_keys, path)
stop_on_user_error(validate_config, config, devices=False)

# every result under RESULTS (and its logs and benchmarks too unless it is "results")
RESULTS = results_dir(config)
VARIANTS = list(config["simulation"]["variants"])
FIGURES = list(config["figures"])
FORMATS = list(config["plot"]["formats"])
EXTRACTED = extracted_models(config)
# the steps of the trained models' weight-only snapshots
SNAPSHOTS = snapshot_steps(config)


def snapshots_output():
    """Rule train's snapshots folder (paths.snapshot_dir), where training.snapshot_steps asks for any."""
    return (
        {"snapshots": directory(paths.snapshot_dir("{model}", RESULTS))}
        if SNAPSHOTS
        else {}
    )


wildcard_constraints:
    variant="|".join(map(re.escape, VARIANTS)),
    figure="|".join(map(re.escape, FIGURES)) or "(?!)",
    model="|".join(map(re.escape, EXTRACTED)),
    seed=r"\d+",


def log_path(name):
    """A rule's log: logs/<name> for the default results folder, <results>/logs/<name> otherwise."""
    return paths.log_file(name, RESULTS)


def stage_inputs(stage):
    """A rule's input: the files its jobs read, by name, wildcards left in ({model}), from its stage in
    workflow/dag.py; the report shows them as paths."""
    return dag.input_patterns(config, RESULTS, stage)


def job_inputs(stage):
    """stage_inputs for a stage whose inputs depend on a wildcard's value (which figure, which pretrained
    model): a function of a job's wildcards, for unpack()."""
    return lambda wildcards: dag.inputs(config, RESULTS, stage, **wildcards)


def stage_params(stage):
    """A rule's params from its stage in workflow/dag.py: `kwargs`, what else decides its outputs (the
    runner's keyword arguments); `code`, the digest of the code it runs; `upstream`, the digest of what its
    inputs were made from (workflow/provenance.py). A change of any of them reruns the job.
    """
    return {
        "kwargs": lambda wildcards: dag.params(config, RESULTS, stage, **wildcards),
        "code": dag.code(stage),
        "upstream": lambda wildcards: provenance.upstream(
            config, RESULTS, stage, **wildcards
        ),
    }


def stage_models(stage):
    """The models the {model} of a stage's rule takes (its `models` in workflow/dag.py)."""
    kind = dag.stage(stage).models
    models = {"trained": MODELS, "pretrained": PRETRAINED}[kind]
    return "|".join(map(re.escape, models)) or "(?!)"


def all_simulations():
    return [paths.simulation_table(v, RESULTS) for v in VARIANTS]


# The report (Snakemake 9's html_reporter, template/components/abstract_results.js) shows a label other than
# the first as a toggle when it has exactly two values, each on half of a table's results, and only when no
# other label qualifies; the toggle starts on the first of its two values in JavaScript's sort order ("yes"
# if that is the second). So "format" is the one two-valued label of every table, and PNG's value sorts first:
# a figure opens as its PNG, fitted to the window, not as a PDF at 31-48% zoom. Other formats are vectors.
PNG_FORMAT_LABEL = "png"


def format_label(ext):
    """The report's "format" label of a figure file with extension `ext`: "png", or "vector pdf" / "vector svg",
    which sort after it."""
    return PNG_FORMAT_LABEL if ext == "png" else f"vector {ext}"


def report_formats(files, caption, category, subcategory, labels):
    """One figure's files (a format each), each shown in `snakemake --report` with `labels` and its format."""
    return [
        snakemake_io.report(
            path,
            caption=caption,
            category=category,
            subcategory=subcategory,
            labels={**labels, "format": format_label(path.rsplit(".", 1)[1])},
        )
        for path in files
    ]


def report_figures(stem, caption="../report/figure.rst", category="Figures"):
    """One figure in every configured format, each shown in `snakemake --report`."""
    return report_formats(
        paths.figure_files(stem, FORMATS, RESULTS),
        caption,
        category,
        lambda wildcards: figure_section(stem.format(**wildcards)),
        {"figure": stem},
    )


def figure_section(name):
    """The report's subcategory of a figure: the part of the paper it belongs to."""
    return FIGURE_SPECS[name].section if name in FIGURE_SPECS else "Figures"


def report_all_layers(model):
    """A model's folder of fig_all_layers pages, each page in the report with its kind and layers."""
    return snakemake_io.report(
        directory(paths.all_layers_dir(model, RESULTS)),
        patterns=[ALL_LAYERS_PAGE],
        caption="../report/all_layers.rst",
        category="Figures",
        subcategory=figure_section(ALL_LAYERS_FIGURE),
        labels=all_layers_labels,
    )


def all_layers_labels(wildcards):
    """The report's labels of one page of fig_all_layers (the wildcards of ALL_LAYERS_PAGE): its model as
    people write it, the page (kind and layers) and the format. The report sorts a table's rows by their
    labels as strings, so the page label sorts by kind (attention scores first, as the paper's Figures 11-13
    before 14-16), then by layer: numbers zero-padded to the widest in the model's folder (01-06, 07-12,
    13-18). Kind and layers share one label: a label of its own with two values would be a second toggle
    beside "format", and the report then shows no toggle at all (see format_label). Short labels keep the
    table beside the figure narrow, and the figure wide."""
    first, last = (int(layer) for layer in wildcards.layers.split("-"))
    width = all_layers_digits(wildcards.model)
    return {
        "model": model_labels(config).get(wildcards.model, wildcards.model),
        "page": f"{ALL_LAYERS_KIND_LABELS.get(wildcards.kind, wildcards.kind)}, "
        f"layers {first:0{width}d}-{last:0{width}d}",
        "format": format_label(wildcards.ext),
    }


# fig_all_layers' kinds in the report, in the order they sort (figures.activations.ALL_LAYERS_KINDS)
ALL_LAYERS_KIND_LABELS = {"raw": "attention scores", "diagnorm": "diagonal-normalised"}


def all_layers_digits(model):
    """Digits of the highest layer among a model's fig_all_layers pages on disk (at least 2, as in their
    file names): the report's labels are made after the run, from the pages found."""
    found = snakemake_io.glob_wildcards(
        os.path.join(paths.all_layers_dir(model, RESULTS), ALL_LAYERS_PAGE)
    ).layers
    return max([2] + [len(layers.split("-")[1].lstrip("0")) for layers in found])


def claims_page_files(results, claim=None):
    """{page: its files} of figL1_claims under `results`: the pages of a ledger of every claim (None) or of
    one claim's rows (catalogue.ledger_pages), in every configured format; known before the rule runs.
    """
    return claims_pages(paths.claims_dir(results), ledger_pages(claim), FORMATS)


def claims_figure_files(results, claim=None):
    """The files of claims_page_files, in a list."""
    return [
        path for files in claims_page_files(results, claim).values() for path in files
    ]


def report_claims_pages():
    """Every page of figL1_claims in every format, each shown in `snakemake --report` with the claims it shows."""
    return [
        entry
        for page, files in claims_page_files(RESULTS).items()
        for entry in report_formats(
            files,
            "../report/claims.rst",
            "Claims",
            figure_section(CLAIMS_FIGURE),
            {"figure": CLAIMS_FIGURE, "claims": page},
        )
    ]


def all_figure_files():
    return [
        path
        for figure in FIGURES
        for path in paths.figure_files(figure, FORMATS, RESULTS)
    ]


def all_model_figures():
    return [paths.all_layers_dir(model, RESULTS) for model in EXTRACTED]


# ---- target paper_llms (rules/paper_llms.smk): its folder, models and figures
PAPER = paper_llms_results(config)
PRETRAINED = pretrained_models(config)
PAPER_FIGURES = paper_llms_figures(config)

# rule paper_llms_figure draws only paper_llms's figures
PAPER_FIGURE = "|".join(map(re.escape, PAPER_FIGURES)) or "(?!)"
# paper_llms's ledger has the rows of claim 8 (the pretrained LLMs) alone
PAPER_CLAIM = dag.PAPER_CLAIM

# ---- target length_seeds: its summary, figures and ledger (claim 11's rows alone) under results/seeds
SEEDS = paths.seeds_dir(RESULTS)
ABLATION_CLAIM = dag.ABLATION_CLAIM
ABLATION_FILE = paths.ABLATION_FILE


def paper_llms_outputs():
    """Every file of target paper_llms."""
    if not PRETRAINED:
        return []
    stems = PAPER_FIGURES + [CONVERGENCE_FIGURE]
    return (
        [
            paths.summary_file(name, PAPER)
            for name in ("claims.parquet", "claims.md", "convergence.parquet")
        ]
        + [path for stem in stems for path in paths.figure_files(stem, FORMATS, PAPER)]
        + claims_figure_files(PAPER, PAPER_CLAIM)
        + [paths.all_layers_dir(model, PAPER) for model in PRETRAINED]
    )


onstart:
    # the executor is known now, and a dry run never gets here
    if workflow.local_exec and workflow.is_main_process:
        stop_on_user_error(check_devices, config, config["training"])
    # Ctrl-C or SIGTERM to Snakemake also stop its running jobs (alone, it waits for them to end)
    from causalpos.workflow.process_control import forward_stop_signals

    forward_stop_signals(workflow.local_exec)
