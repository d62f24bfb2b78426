# Issue 6: every claim of the paper as a measured verdict, from the other stages' Parquet results.


rule claims:
    input:
        **CLAIMS_INPUTS,
    output:
        table=paths.summary_file("claims.parquet", RESULTS),
        markdown=paths.summary_file("claims.md", RESULTS),
        figures=report_figures(
            CLAIMS_FIGURE, caption="../report/claims.rst", category="Claims"
        ),
    log:
        log_path("claims.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        settings=config["claims"],
        options=config["plot"],
        code=code_digest("claims"),
        upstream=upstream_of("claims"),
    script:
        "../workflow_scripts/claims.py"
