# causalpos: reproduce "Behind RoPE: How Does Causal Mask Encode Positional Information?"
# Run:  snakemake --cores 8 all_figures      (config: config.yaml, checked before any job)
#       snakemake --cores 8 length_seeds     (length and pattern ablation over training seeds: more trainings)
#       snakemake --cores 8 paper_llms       (Section 5.2 at the paper's size: 1,000 x 1,024 tokens per LLM; hours on a CPU)
#       snakemake --cores 8 window_control   (Gemma-3's windows as trained and lifted, 1,024 tokens: the window's own effect)
#       snakemake --cores 8 mask_controls    (the LLMs' pattern on content controls, claim 12's ledger: three more extractions per LLM)
#       snakemake --cores 2 results/simulation/l2_alpha0.0.parquet   (any result: the jobs it needs, and no other)
#       snakemake --cores 8 verify           (all, with every byte of every result checked against what its job wrote)
# rules/*.smk are the DAG: each rule's inputs, outputs and params; its code is causalpos.jobs.<rule>.

import os

from snakemake.utils import min_version

from causalpos.workflow.config import check_duplicate_keys
from causalpos.workflow.user_errors import stop_on_user_error

min_version("9.19")  # as pyproject.toml's snakemake requirement

# the checkout envs/causalpos.yaml installs (its pip: entry) where jobs run in conda environments: this
# file's folder, also when another workflow uses this one as a module (from a local folder)
os.environ["CAUSALPOS_ROOT"] = workflow.current_basedir.get_path_or_uri(
    secret_free=True
)


# a job ends when this Snakemake does, even one killed before the job's first instruction (runtime.processes)
os.environ["CAUSALPOS_SNAKEMAKE_PID"] = str(os.getpid())


envvars:
    "CAUSALPOS_ROOT",
    "CAUSALPOS_SNAKEMAKE_PID",


# config.yaml unless --configfile names another: `--configfile .test/config.yaml` runs that config alone
# (Snakemake would otherwise merge it into config.yaml's), as `causalpos --configfile` does.
# A config.yaml that is not YAML stops here with the file, line and column (Snakemake's own message names neither).
# A workflow used as a module (tests/test_module.py) reads no configfile of its own.
if not workflow.overwrite_configfiles:
    if not workflow.modifier.skip_configfile:
        stop_on_user_error(check_duplicate_keys, "config.yaml")

    configfile: "config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/theory.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/extract.smk"
include: "rules/figures.smk"
include: "rules/claims.smk"
include: "rules/report.smk"


# a job names the rule that rebuilds a damaged input: the outputs of every rule above
publish_writers()


ALL = [
    rules.theory.output,
    rules.recursion.output,
    rules.tokenizer.output,
    [paths.table_file("length_eval", RESULTS, model=m) for m in TRAINED],
    all_simulations(),
    paths.summary_tables(RESULTS),
    rules.heads.output,
    [paths.table_file("emergence", RESULTS)] if SNAPSHOTS else [],
    paths.table_file("pattern_ablation_summary", RESULTS),
    paths.table_file("claims", RESULTS),
    rules.runtimes.output,
    rules.config_record.output,
    rules.environment.output,
    all_figure_files(),
    [figure_paths.all_layers_dir(model, RESULTS) for model in EXTRACTED],
]


# Each target also asks for what it rests on that a finished run has lost (a deleted model, a damaged token file):
# their jobs run again and everything made from them follows (workflow.verify).
rule all:
    input:
        ALL,
        lost=lost(ALL),


# The README's command: every figure and every table the figures and the docs rely on, i.e. all of `all`.
rule all_figures:
    input:
        rules.all.input,


# `all`, with every byte of every result it rests on checked against what its job wrote (causalpos.checksums):
# a flipped bit with the mtime kept, which `all` (size and mtime) does not see. What is damaged is moved aside and
# made again, in a dry run too (snakemake -n verify: the plan).
rule verify:
    input:
        ALL,
        lost=lost(ALL, full=True),


# The comparisons over training seeds (evaluation.seeds), not part of `all`: each seed trains both models again. The
# length table and figure, the pattern ablation of every seed and its ledger (claim 11, under results/seeds).
LENGTH_SEEDS = [
    rules.length_seeds_table.output,
    paths.table_file("pattern_ablation_summary", SEEDS),
    paths.table_file("claims", SEEDS),
]


rule length_seeds:
    input:
        LENGTH_SEEDS,
        lost=lost(LENGTH_SEEDS),


# Section 5.2 at the paper's size: every model of extraction.pretrained.models on extraction.paper_llms's sequences
# (1,000 x 1,024 tokens by default), the same LLM figures and claim 8's ledger rows, and the convergence table, all
# under results/paper_llms: the default run's files are never written.
MASK_CONTROLS = [
    rules.controls_table.output.table,
    rules.controls_table.output.figures,
    paths.table_file("claims", CONTROLS_ROOT),
]


WINDOW_CONTROL = [
    paths.table_file("window_test", WINDOWS_ROOT),
]


# issue 43: the sliding-window LLMs' window test at extraction.window_control's size, with the windows lifted beside
rule window_control:
    input:
        WINDOW_CONTROL,
        lost=lost(WINDOW_CONTROL),


# issue 43: the pretrained LLMs' pattern on content controls, and claim 12's ledger (results/controls/summary)
rule mask_controls:
    input:
        MASK_CONTROLS,
        lost=lost(MASK_CONTROLS),


rule paper_llms:
    input:
        paper_llms_outputs(),
        lost=lost(paper_llms_outputs()),
