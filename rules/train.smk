rule train:
    input:
        blocks=paths.tokens_file("blocks.json"),
        train=paths.tokens_file("train.npy"),
        heldout=paths.tokens_file("heldout.npy"),
        tokenizer=f"{paths.tokenizer_dir()}/tokenizer.json",
    output:
        model=paths.model_file("{model}", "model.safetensors"),
        config=paths.model_file("{model}", "config.json"),
        metrics=paths.model_file("{model}", "metrics.parquet"),
    log:
        "logs/train/{model}.log",
    benchmark:
        paths.train_benchmark("{model}")
    conda:
        "../envs/causalpos.yaml"
    threads: config["simulation"]["threads"]
    resources:
        mem_mb=8192,
    params:
        settings=training_settings_param,
        processes=config["train_processes"],
        checkpoint_root=paths.checkpoints_dir(),
        code=code_digest("train"),
        upstream=upstream_of("train"),
    script:
        "../workflow_scripts/train.py"


rule length_eval:
    input:
        model=paths.model_file("{model}", "model.safetensors"),
        blocks=paths.tokens_file("blocks.json"),
        heldout=paths.tokens_file("heldout.npy"),
    output:
        paths.model_file("{model}", "length_eval.parquet"),
    log:
        "logs/length_eval/{model}.log",
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
