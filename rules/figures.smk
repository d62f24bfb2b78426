rule figure:
    input:
        unpack(figure_inputs),
    output:
        report_figures("{figure}"),
    log:
        log_path("figures/{figure}.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        options=plot_settings,
        code=code_digest("plot"),
        upstream=upstream_of("figure"),
    script:
        "../workflow_scripts/plot.py"
