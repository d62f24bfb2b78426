# Issue 6: every claim of the paper as a measured verdict, from the other stages' Parquet results.


rule claims:
    input:
        **stage_inputs("claims"),
    output:
        table=paths.summary_file("claims.parquet", RESULTS),
        markdown=paths.summary_file("claims.md", RESULTS),
        # one page per part of the paper (catalogue.PAGES), in a folder, as fig_all_layers's
        figures=report_claims_pages(),
    log:
        log_path("claims.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("claims"),
    script:
        "../workflow_scripts/claims.py"


# Issue 13: claim 8 (the pretrained LLMs) on the first groups of sequences, N = all, all / 2, ...: do the
# verdicts hold as N grows? Rule claims notes a verdict that changes.
rule convergence:
    input:
        **stage_inputs("convergence"),
    output:
        table=paths.summary_file("convergence.parquet", RESULTS),
        figures=report_figures(
            CONVERGENCE_FIGURE, caption="../report/convergence.rst", category="Claims"
        ),
    log:
        log_path("convergence.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("convergence"),
    script:
        "../workflow_scripts/convergence.py"


# Issue 25: the sliding-window layers of the pretrained LLMs (Gemma-3) before and after their window, against
# the recursion of their own stack; paper_llms's tables where they exist (queries past the window), else the
# default run's. Claim 10d-10e read it.
rule window_test:
    input:
        **stage_inputs("window_test"),
    output:
        paths.summary_file("window_test.parquet", RESULTS),
    log:
        log_path("window_test.log"),
    conda:
        "../envs/causalpos.yaml"
    resources:
        mem_mb=8192,
    params:
        **stage_params("window_test"),
    script:
        "../workflow_scripts/window_test.py"


# Issue 27: claim 11 (the pattern ablation) over every training seed, for target length_seeds: its rows alone,
# under results/seeds (SEEDS), as paper_llms's ledger has claim 8's.
use rule claims as length_seeds_claims with:
    input:
        **stage_inputs("length_seeds_claims"),
    output:
        table=paths.summary_file("claims.parquet", SEEDS),
        markdown=paths.summary_file("claims.md", SEEDS),
        figures=claims_figure_files(SEEDS, ABLATION_CLAIM),
    log:
        log_path("length_seeds_claims.log"),
    params:
        **stage_params("length_seeds_claims"),
