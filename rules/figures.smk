rule figure:
    input:
        unpack(figure_inputs),
    output:
        multiext("results/figures/{figure}", *FIGURE_EXTENSIONS),
    log:
        "logs/figures/{figure}.log",
    conda:
        "../envs/causalpos.yaml"
    params:
        options=plot_settings,
        code=code_digest("plot"),
    script:
        "../workflow_scripts/plot.py"
