# Cached between workflows (cache: True, needs --cache and SNAKEMAKE_OUTPUT_CACHE): the
# output depends only on params and inputs. Snakemake allows no benchmark: on a cached rule;
# the job's run time is in the report's statistics and in results/summary/runtimes.parquet.
rule pretrained:
    output:
        directory(paths.pretrained_dir("{model}", RESULTS)),
    log:
        log_path("pretrained/{model}.log"),
    wildcard_constraints:
        model=stage_models("pretrained"),
    cache: True
    conda:
        "../envs/causalpos.yaml"
    resources:
        mem_mb=4096,
    params:
        **stage_params("pretrained"),
    script:
        "../workflow_scripts/pretrained.py"


# The trained twins, on the evaluation snippets.
rule extract_trained:
    input:
        **stage_inputs("extract_trained"),
    output:
        **paths.activation_tables("{model}", RESULTS),
    log:
        log_path("extract/{model}.log"),
    wildcard_constraints:
        model=stage_models("extract_trained"),
    cache: True
    conda:
        "../envs/causalpos.yaml"
    threads: config["extraction"]["threads"]
    resources:
        mem_mb=8192,
    params:
        **stage_params("extract_trained"),
        state=paths.extraction_state_dir("{model}", RESULTS),
    script:
        "../workflow_scripts/extract.py"


# The pretrained LLMs, on held-out documents (and the safetensors copy of a GGUF file).
use rule extract_trained as extract_pretrained with:
    input:
        unpack(job_inputs("extract_pretrained")),
    wildcard_constraints:
        model=stage_models("extract_pretrained"),
    params:
        **stage_params("extract_pretrained"),
        state=paths.extraction_state_dir("{model}", RESULTS),


# Issue 27: a pretrained LLM's loss with its non-relative pattern taken out, at its extraction's length.
rule pattern_ablation_pretrained:
    input:
        unpack(job_inputs("pattern_ablation_pretrained")),
    output:
        paths.pretrained_ablation("{model}", RESULTS),
    log:
        log_path("pattern_ablation/{model}.log"),
    benchmark:
        paths.ablation_benchmark("{model}", RESULTS)
    wildcard_constraints:
        model=stage_models("pattern_ablation_pretrained"),
    conda:
        "../envs/causalpos.yaml"
    threads: config["extraction"]["threads"]
    resources:
        mem_mb=8192,
    params:
        **stage_params("pattern_ablation_pretrained"),
    script:
        "../workflow_scripts/pattern_ablation_pretrained.py"


rule summary:
    input:
        **stage_inputs("summary"),
    output:
        paths.summary_tables(RESULTS),
    log:
        log_path("summary.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("summary"),
    script:
        "../workflow_scripts/summary.py"


# Issue 26: each attention head of every extracted model (extraction.per_head), the summary's amplitude and
# claim 8d's first-key emphasis per head; no rows where the extractions kept no heads.
rule heads:
    input:
        **stage_inputs("heads"),
    output:
        paths.summary_file("heads.parquet", RESULTS),
    log:
        log_path("heads.log"),
    benchmark:
        paths.heads_benchmark(RESULTS)
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("heads"),
    script:
        "../workflow_scripts/heads.py"


# Figures 11-16 of one model, trained or pretrained: a rule each, as the extraction.
rule model_figure_trained:
    input:
        **stage_inputs("model_figure_trained"),
    output:
        report_all_layers("{model}"),
    log:
        log_path("figures/fig_all_layers_{model}.log"),
    wildcard_constraints:
        model=stage_models("model_figure_trained"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("model_figure_trained"),
    script:
        "../workflow_scripts/model_figure.py"


use rule model_figure_trained as model_figure_pretrained with:
    input:
        **stage_inputs("model_figure_pretrained"),
    wildcard_constraints:
        model=stage_models("model_figure_pretrained"),
    params:
        **stage_params("model_figure_pretrained"),
