# `snakemake --report report.html`: every figure (rules figure, model_figure), the
# claims, the configuration and this table of run times.


rule runtimes:
    input:
        **stage_inputs("runtimes"),
    output:
        table=paths.summary_file("runtimes.parquet", RESULTS),
        html=report(
            paths.summary_file("runtimes.html", RESULTS),
            caption="../report/runtimes.rst",
            category="Runtimes",
        ),
    log:
        log_path("runtimes.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("runtimes"),
    script:
        "../workflow_scripts/runtimes.py"


# Snakemake 9's HTML report does not show the config files; this page does, with
# every default the schema filled in.
rule config_record:
    output:
        report(
            paths.summary_file("config.html", RESULTS),
            caption="../report/config.rst",
            category="Configuration",
        ),
    log:
        log_path("config_record.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("config_record"),
    script:
        "../workflow_scripts/config_record.py"
