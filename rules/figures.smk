rule figure:
    input:
        unpack(job_inputs("figure")),
    output:
        report_figures("{figure}"),
    log:
        log_path("figures/{figure}.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("figure"),
    script:
        "../workflow_scripts/plot.py"
