rule train:
    input:
        blocks=paths.tokens_file("blocks.json", RESULTS),
        train=paths.tokens_file("train.npy", RESULTS),
        heldout=paths.tokens_file("heldout.npy", RESULTS),
        tokenizer=f"{paths.tokenizer_dir(RESULTS)}/tokenizer.json",
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
    conda:
        "../envs/causalpos.yaml"
    threads: config["simulation"]["threads"]
    resources:
        mem_mb=8192,
    params:
        settings=training_settings_param,
        processes=config["train_processes"],
        checkpoint_root=paths.checkpoints_dir(RESULTS),
        code=code_digest("train"),
        upstream=upstream_of("train"),
    script:
        "../workflow_scripts/train.py"


rule length_eval:
    input:
        model=paths.model_file("{model}", "model.safetensors", RESULTS),
        blocks=paths.tokens_file("blocks.json", RESULTS),
        heldout=paths.tokens_file("heldout.npy", RESULTS),
    output:
        paths.model_file("{model}", "length_eval.parquet", RESULTS),
    log:
        log_path("length_eval/{model}.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        factors=config["evaluation"]["length_factors"],
        max_sequences=config["evaluation"]["length_sequences"],
        device=config["training"].get("device", "auto"),
        code=code_digest("length_eval"),
        upstream=upstream_of("length_eval"),
    script:
        "../workflow_scripts/length_eval.py"


# Section 4.2's extraction at every snapshot of a trained model, and the held-out loss there.
rule emergence:
    input:
        model=paths.model_file("{model}", "model.safetensors", RESULTS),
        info=paths.model_file("{model}", "training.json", RESULTS),
        snapshots=paths.snapshot_dir("{model}", RESULTS),
        metrics=paths.model_file("{model}", "metrics.parquet", RESULTS),
        tokens=paths.tokens_file("snippets.npy", RESULTS),
        blocks=paths.tokens_file("blocks.json", RESULTS),
        heldout=paths.tokens_file("heldout.npy", RESULTS),
    output:
        **paths.emergence_tables("{model}", RESULTS),
    log:
        log_path("emergence/{model}.log"),
    benchmark:
        paths.emergence_benchmark("{model}", RESULTS)
    conda:
        "../envs/causalpos.yaml"
    threads: config["simulation"]["threads"]
    resources:
        mem_mb=4096,
    params:
        settings=emergence_settings(config),
        steps=SNAPSHOTS,
        device=config["extraction"]["device"],
        seed=config["data"]["seed"],
        code=code_digest("emergence"),
        upstream=upstream_of("emergence"),
    script:
        "../workflow_scripts/emergence.py"


rule emergence_summary:
    input:
        **{
            table: [paths.emergence_table(m, table, RESULTS) for m in MODELS]
            for table in paths.EMERGENCE_TABLES
        },
        simulations=[
            paths.simulation_table(v, RESULTS) for v in emergence_variants(config)
        ],
    output:
        paths.summary_file("emergence.parquet", RESULTS),
    log:
        log_path("emergence_summary.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        settings=config["claims"],
        code=code_digest("emergence_summary"),
        upstream=upstream_of("emergence_summary"),
    script:
        "../workflow_scripts/emergence_summary.py"


# Length generalisation over training seeds: its own target (`snakemake --cores 2 length_seeds`), not
# part of `all`: each seed trains both models again (docs/models.md).
rule train_seed:
    input:
        blocks=paths.tokens_file("blocks.json", RESULTS),
        train=paths.tokens_file("train.npy", RESULTS),
        heldout=paths.tokens_file("heldout.npy", RESULTS),
        tokenizer=f"{paths.tokenizer_dir(RESULTS)}/tokenizer.json",
    output:
        model=paths.seed_model_file("{model}", "{seed}", "model.safetensors", RESULTS),
        config=paths.seed_model_file("{model}", "{seed}", "config.json", RESULTS),
        metrics=paths.seed_model_file("{model}", "{seed}", "metrics.parquet", RESULTS),
    log:
        log_path("train_seed/{model}_seed{seed}.log"),
    benchmark:
        paths.seed_train_benchmark("{model}", "{seed}", RESULTS)
    conda:
        "../envs/causalpos.yaml"
    threads: config["simulation"]["threads"]
    resources:
        mem_mb=8192,
    params:
        settings=seed_training_settings,
        processes=config["train_processes"],
        checkpoint_root=paths.checkpoints_dir(RESULTS),
        code=code_digest("train"),
        upstream=upstream_of("train_seed"),
    script:
        "../workflow_scripts/train.py"


rule length_eval_seed:
    input:
        model=paths.seed_model_file("{model}", "{seed}", "model.safetensors", RESULTS),
        blocks=paths.tokens_file("blocks.json", RESULTS),
        heldout=paths.tokens_file("heldout.npy", RESULTS),
    output:
        paths.seed_model_file("{model}", "{seed}", "length_eval.parquet", RESULTS),
    log:
        log_path("length_eval_seed/{model}_seed{seed}.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        factors=config["evaluation"]["length_factors"],
        max_sequences=config["evaluation"]["length_sequences"],
        device=config["training"].get("device", "auto"),
        code=code_digest("length_eval"),
        upstream=upstream_of("length_eval_seed"),
    script:
        "../workflow_scripts/length_eval.py"


rule length_seeds:
    input:
        [path for _, _, path in seed_runs()],
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
        runs=[[m, s] for m, s, _ in seed_runs()],
        options=config["plot"],
        code=code_digest("length_seeds"),
        upstream=upstream_of("length_seeds"),
    script:
        "../workflow_scripts/length_seeds.py"
