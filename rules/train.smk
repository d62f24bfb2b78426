rule train:
    input:
        blocks=f"{TOKENS_DIR}/blocks.json",
        train=f"{TOKENS_DIR}/train.npy",
        heldout=f"{TOKENS_DIR}/heldout.npy",
        tokenizer=f"{TOKENIZER_DIR}/tokenizer.json",
    output:
        model="results/models/{model}/model.safetensors",
        config="results/models/{model}/config.json",
        metrics="results/models/{model}/metrics.parquet",
    log:
        "logs/train/{model}.log",
    benchmark:
        "benchmarks/train/{model}.tsv"
    conda:
        "../envs/causalpos.yaml"
    threads: config["simulation"]["threads"]
    resources:
        mem_mb=8192,
    params:
        settings=training_settings_param,
        processes=config["train_processes"],
        checkpoint_root="results/checkpoints",
        code=code_digest("train"),
    script:
        "../workflow_scripts/train.py"


rule length_eval:
    input:
        model="results/models/{model}/model.safetensors",
        blocks=f"{TOKENS_DIR}/blocks.json",
        heldout=f"{TOKENS_DIR}/heldout.npy",
    output:
        "results/models/{model}/length_eval.parquet",
    log:
        "logs/length_eval/{model}.log",
    conda:
        "../envs/causalpos.yaml"
    params:
        factors=config["evaluation"]["length_factors"],
        max_sequences=config["evaluation"]["length_sequences"],
        device=config["training"].get("device", "auto"),
        code=code_digest("length_eval"),
    script:
        "../workflow_scripts/length_eval.py"
