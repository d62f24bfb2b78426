# Sections 4.2 and 5.2: inside the trained models and the pretrained RoPE LLMs, at the default run's size (results/)
# and, for the pretrained ones, at the paper's (target paper_llms: results/paper_llms/).


# A GGUF model of extraction.pretrained.models dequantised to safetensors. Cached between workflows (see rule
# simulate).
rule pretrained:
    output:
        directory(paths.pretrained_dir("{model}", RESULTS)),
    log:
        log_path("pretrained/{model}.log"),
    wildcard_constraints:
        model=one_of(GGUF),
    cache: True
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("pretrained")
    resources:
        **job_resources("pretrained"),
    params:
        spec=lambda wildcards: settings.pretrained_spec(config, wildcards.model),
        code=code("pretrained"),
    script:
        "../workflow_scripts/job.py"


# Every layer's scores, Figure 3's intermediates, the position probe and each head's map of one model: a trained
# twin on the evaluation snippets, a pretrained LLM on held-out documents in its own tokenizer (in a folder of
# CONTROLS: on that content control's sequences, target mask_controls; in one of WINDOW_FOLDERS: at
# extraction.window_control's size, its sliding windows as trained or lifted, target window_control).
rule extract:
    input:
        unpack(extraction_inputs),
    output:
        **paths.activation_tables("{model}", "{results}"),
    log:
        log_path("extract/{model}.log", "{results}"),
    wildcard_constraints:
        results=one_of([RESULTS, PAPER, *CONTROLS, *WINDOW_FOLDERS]),
        model=one_of(EXTRACTED),
    cache: True
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("extract")
    resources:
        **job_resources("extract"),
    params:
        settings=extraction_settings,
        location=lambda wildcards: settings.model_location(
            config, wildcards.model, RESULTS
        ),
        device=config["extraction"]["device"],
        seed=config["data"]["seed"],
        state=lambda wildcards: paths.extraction_state_dir(
            wildcards.model, wildcards.results
        ),
        code=code("extract"),
        upstream=upstream("extract"),
    script:
        "../workflow_scripts/job.py"


# Issue 27: a pretrained LLM's loss with its non-relative pattern taken out, at its extraction's length.
rule pattern_ablation_pretrained:
    input:
        unpack(pretrained_inputs),
    output:
        paths.pretrained_ablation("{model}", RESULTS),
    log:
        log_path("pattern_ablation/{model}.log"),
    benchmark:
        paths.ablation_benchmark("{model}", RESULTS)
    wildcard_constraints:
        model=one_of(PRETRAINED),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("pattern_ablation_pretrained")
    resources:
        **job_resources("pattern_ablation_pretrained"),
    params:
        settings=lambda wildcards: settings.pretrained_ablation_settings(
            config, wildcards.model
        ),
        n_estimate=config["evaluation"]["ablation_sequences"],
        n_evaluate=config["evaluation"]["length_sequences"],
        location=lambda wildcards: settings.model_location(
            config, wildcards.model, RESULTS
        ),
        device=config["extraction"]["device"],
        seed=config["data"]["seed"],
        code=code("pattern_ablation_pretrained"),
        upstream=upstream("pattern_ablation_pretrained"),
    script:
        "../workflow_scripts/job.py"


# Per model and layer: the non-relativeness, the increasing fraction and the position probe, of every extracted model
# (in paper_llms's folder: of the pretrained LLMs at the paper's size).
rule summary:
    input:
        unpack(summary_inputs),
    output:
        paths.summary_tables("{results}"),
    log:
        log_path("summary.log", "{results}"),
    wildcard_constraints:
        results=one_of([RESULTS, PAPER]),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("summary")
    resources:
        **job_resources("summary"),
    params:
        code=code("summary"),
        upstream=upstream("summary"),
    script:
        "../workflow_scripts/job.py"


# Issue 26: each attention head of every extracted model (extraction.per_head), the summary's amplitude and claim
# 8d's first-key emphasis per head; no rows where the extractions kept no heads.
rule heads:
    input:
        **extraction_tables(EXTRACTED, RESULTS, ("head_scores",)),
    output:
        paths.table_file("heads", RESULTS),
    log:
        log_path("heads.log"),
    benchmark:
        paths.heads_benchmark(RESULTS)
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("heads")
    resources:
        **job_resources("heads"),
    params:
        code=code("heads"),
        upstream=upstream("heads"),
    script:
        "../workflow_scripts/job.py"


# Figures 11-16 of one model: every layer's scores, raw and diagonal-normalised, a folder of pages.
rule model_figure:
    input:
        scores=paths.activation_table("{model}", "scores", "{results}"),
    output:
        report_folder(
            figure_paths.all_layers_dir("{model}", "{results}"),
            ALL_LAYERS_PAGE,
            "Figures",
            ALL_LAYERS_FIGURE,
            all_layers_labels,
        ),
    log:
        log_path("figures/fig_all_layers_{model}.log", "{results}"),
    wildcard_constraints:
        results=one_of([RESULTS, PAPER]),
        model=one_of(EXTRACTED),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("model_figure")
    resources:
        **job_resources("model_figure"),
    params:
        options=lambda wildcards: settings.plot_options(config, model=wildcards.model),
        code=code("model_figure"),
        upstream=upstream("model_figure"),
    script:
        "../workflow_scripts/job.py"
