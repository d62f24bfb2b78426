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
