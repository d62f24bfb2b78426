# Cached between workflows (cache: True, needs --cache and SNAKEMAKE_OUTPUT_CACHE): the
# output depends only on params and inputs. Snakemake allows no benchmark: on a cached rule;
# the job's run time is in the report's statistics and in results/summary/runtimes.parquet.
rule pretrained:
    output:
        directory(paths.pretrained_dir("{model}", RESULTS)),
    log:
        log_path("pretrained/{model}.log"),
    cache: True
    conda:
        "../envs/causalpos.yaml"
    resources:
        mem_mb=4096,
    params:
        spec=pretrained_spec,
        code=code_digest("pretrained"),
    script:
        "../workflow_scripts/pretrained.py"


rule extract:
    input:
        unpack(extraction_inputs),
    output:
        **paths.activation_tables("{model}", RESULTS),
    log:
        log_path("extract/{model}.log"),
    cache: True
    conda:
        "../envs/causalpos.yaml"
    threads: config["simulation"]["threads"]
    resources:
        mem_mb=8192,
    params:
        settings=extraction_settings_param,
        location=model_location_param,
        device=config["extraction"]["device"],
        seed=config["data"]["seed"],
        state=paths.extraction_state_dir("{model}", RESULTS),
        code=code_digest("extract"),
        upstream=upstream_of("extract"),
    script:
        "../workflow_scripts/extract.py"


rule summary:
    input:
        scores=[paths.activation_table(m, "scores", RESULTS) for m in EXTRACTED],
        probe=[paths.activation_table(m, "probe", RESULTS) for m in EXTRACTED],
    output:
        paths.summary_tables(RESULTS),
    log:
        log_path("summary.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        code=code_digest("summary"),
        upstream=upstream_of("summary"),
    script:
        "../workflow_scripts/summary.py"


rule model_figure:
    input:
        scores=paths.activation_table("{model}", "scores", RESULTS),
    output:
        report_all_layers("{model}"),
    log:
        log_path("figures/fig_all_layers_{model}.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        options=model_figure_options,
        code=code_digest("plot"),
        upstream=upstream_of("model_figure"),
    script:
        "../workflow_scripts/model_figure.py"
