rule train:
    input:
        **stage_inputs("train"),
    output:
        **snapshots_output(),
        model=paths.model_file("{model}", "model.safetensors", RESULTS),
        config=paths.model_file("{model}", "config.json", RESULTS),
        info=paths.model_file("{model}", "training.json", RESULTS),
        metrics=paths.model_file("{model}", "metrics.parquet", RESULTS),
    log:
        log_path("train/{model}.log"),
    benchmark:
        paths.train_benchmark("{model}", RESULTS)
    wildcard_constraints:
        model=stage_models("train"),
    conda:
        "../envs/causalpos.yaml"
    threads: config["training"]["threads"]
    resources:
        mem_mb=8192,
    params:
        **stage_params("train"),
        checkpoint_root=paths.checkpoints_dir(RESULTS),
    script:
        "../workflow_scripts/train.py"


rule length_eval:
    input:
        **stage_inputs("length_eval"),
    output:
        paths.model_file("{model}", "length_eval.parquet", RESULTS),
    log:
        log_path("length_eval/{model}.log"),
    wildcard_constraints:
        model=stage_models("length_eval"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("length_eval"),
    script:
        "../workflow_scripts/length_eval.py"


# Issue 27: the held-out loss at every length with the model's non-relative pattern taken out, and its controls.
rule pattern_ablation:
    input:
        **stage_inputs("pattern_ablation"),
    output:
        paths.model_file("{model}", ABLATION_FILE, RESULTS),
    log:
        log_path("pattern_ablation/{model}.log"),
    benchmark:
        paths.ablation_benchmark("{model}", RESULTS)
    wildcard_constraints:
        model=stage_models("pattern_ablation"),
    conda:
        "../envs/causalpos.yaml"
    threads: config["extraction"]["threads"]
    resources:
        mem_mb=4096,
    params:
        **stage_params("pattern_ablation"),
    script:
        "../workflow_scripts/pattern_ablation.py"


# Every model's ablation table in one, and its figure (rule pattern_ablation_seeds: every training seed).
rule pattern_ablation_summary:
    input:
        **stage_inputs("pattern_ablation_summary"),
    output:
        table=paths.summary_file(ABLATION_FILE, RESULTS),
        figures=report_figures(
            ABLATION_FIGURE, caption="../report/pattern_ablation.rst"
        ),
    log:
        log_path("pattern_ablation_summary.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("pattern_ablation_summary"),
    script:
        "../workflow_scripts/pattern_ablation_summary.py"


# Section 4.2's extraction at every snapshot of a trained model, and the held-out loss there.
rule emergence:
    input:
        **stage_inputs("emergence"),
    output:
        **paths.emergence_tables("{model}", RESULTS),
    log:
        log_path("emergence/{model}.log"),
    benchmark:
        paths.emergence_benchmark("{model}", RESULTS)
    wildcard_constraints:
        model=stage_models("emergence"),
    conda:
        "../envs/causalpos.yaml"
    threads: config["extraction"]["threads"]
    resources:
        mem_mb=4096,
    params:
        **stage_params("emergence"),
    script:
        "../workflow_scripts/emergence.py"


rule emergence_summary:
    input:
        **stage_inputs("emergence_summary"),
    output:
        paths.summary_file("emergence.parquet", RESULTS),
    log:
        log_path("emergence_summary.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("emergence_summary"),
    script:
        "../workflow_scripts/emergence_summary.py"


# Length generalisation over training seeds: its own target (`snakemake --cores 2 length_seeds`), not
# part of `all`: each seed trains both models again (docs/models.md), as rule train does.
use rule train as train_seed with:
    input:
        **stage_inputs("train_seed"),
    output:
        model=paths.seed_model_file("{model}", "{seed}", "model.safetensors", RESULTS),
        config=paths.seed_model_file("{model}", "{seed}", "config.json", RESULTS),
        metrics=paths.seed_model_file("{model}", "{seed}", "metrics.parquet", RESULTS),
    log:
        log_path("train_seed/{model}_seed{seed}.log"),
    benchmark:
        paths.seed_train_benchmark("{model}", "{seed}", RESULTS)
    params:
        **stage_params("train_seed"),
        checkpoint_root=paths.checkpoints_dir(RESULTS),


use rule length_eval as length_eval_seed with:
    input:
        **stage_inputs("length_eval_seed"),
    output:
        paths.seed_model_file("{model}", "{seed}", "length_eval.parquet", RESULTS),
    log:
        log_path("length_eval_seed/{model}_seed{seed}.log"),
    params:
        **stage_params("length_eval_seed"),


rule length_seeds_table:
    input:
        **stage_inputs("length_seeds_table"),
    output:
        table=paths.summary_file("length_seeds.parquet", RESULTS),
        figures=report_figures(
            LENGTH_SEEDS_FIGURE, caption="../report/length_seeds.rst"
        ),
    log:
        log_path("length_seeds.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("length_seeds_table"),
    script:
        "../workflow_scripts/length_seeds.py"


use rule pattern_ablation as pattern_ablation_seed with:
    input:
        **stage_inputs("pattern_ablation_seed"),
    output:
        paths.seed_model_file("{model}", "{seed}", ABLATION_FILE, RESULTS),
    log:
        log_path("pattern_ablation_seed/{model}_seed{seed}.log"),
    benchmark:
        paths.ablation_benchmark("{model}_seed{seed}", RESULTS)
    params:
        **stage_params("pattern_ablation_seed"),


use rule pattern_ablation_summary as pattern_ablation_seeds with:
    input:
        **stage_inputs("pattern_ablation_seeds"),
    output:
        table=paths.summary_file(ABLATION_FILE, SEEDS),
        figures=paths.figure_files(ABLATION_FIGURE, FORMATS, SEEDS),
    log:
        log_path("pattern_ablation_seeds.log"),
    params:
        **stage_params("pattern_ablation_seeds"),
