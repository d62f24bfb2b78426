rule figure:
    input:
        unpack(figure_inputs),
    output:
        multiext("results/figures/{figure}", *FIGURE_EXTENSIONS),
    params:
        options=plot_settings,
        code=code_digest("plot"),
    log:
        "logs/figures/{figure}.log",
    script:
        "../workflow_scripts/plot.py"
