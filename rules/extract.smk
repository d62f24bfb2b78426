rule pretrained:
    output:
        "results/pretrained/{model}/model.safetensors",
    log:
        "logs/pretrained/{model}.log",
    benchmark:
        "benchmarks/pretrained/{model}.tsv"
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
        scores="results/activations/{model}/scores.parquet",
        intermediates="results/activations/{model}/intermediates.parquet",
        probe="results/activations/{model}/probe.parquet",
    log:
        "logs/extract/{model}.log",
    benchmark:
        "benchmarks/extract/{model}.tsv"
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
        code=code_digest("extract"),
    script:
        "../workflow_scripts/extract.py"


rule summary:
    input:
        scores=expand("results/activations/{model}/scores.parquet", model=EXTRACTED),
        probe=expand("results/activations/{model}/probe.parquet", model=EXTRACTED),
    output:
        SUMMARY_TABLES,
    log:
        "logs/summary.log",
    conda:
        "../envs/causalpos.yaml"
    params:
        code=code_digest("summary"),
    script:
        "../workflow_scripts/summary.py"


rule model_figure:
    input:
        scores="results/activations/{model}/scores.parquet",
    output:
        multiext("results/figures/fig_all_layers_{model}", *FIGURE_EXTENSIONS),
    log:
        "logs/figures/fig_all_layers_{model}.log",
    conda:
        "../envs/causalpos.yaml"
    params:
        options=model_figure_options,
        code=code_digest("plot"),
    script:
        "../workflow_scripts/model_figure.py"
