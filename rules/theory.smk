rule theory:
    output:
        paths.theory_table(RESULTS),
    log:
        log_path("theory.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("theory"),
    script:
        "../workflow_scripts/theory.py"
