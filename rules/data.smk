rule sample:
    output:
        DOCUMENTS,
    log:
        "logs/sample.log",
    conda:
        "../envs/causalpos.yaml"
    params:
        sources=config["data"]["sources"],
        heldout_fraction=config["data"]["heldout_fraction"],
        seed=config["data"]["seed"],
        max_documents=config["data"]["max_documents"],
        code=code_digest("sample"),
    script:
        "../workflow_scripts/sample.py"


rule tokenizer:
    input:
        DOCUMENTS,
    output:
        tokenizer=f"{TOKENIZER_DIR}/tokenizer.json",
        tokenizer_config=f"{TOKENIZER_DIR}/tokenizer_config.json",
        train=f"{TOKENS_DIR}/train.npy",
        heldout=f"{TOKENS_DIR}/heldout.npy",
        blocks=f"{TOKENS_DIR}/blocks.json",
        snippets=f"{TOKENS_DIR}/snippets.npy",
        snippet_documents=f"{TOKENS_DIR}/snippets.parquet",
    log:
        "logs/tokenizer.log",
    cache: True  # between workflows; no benchmark: allowed (see rule pretrained)
    conda:
        "../envs/causalpos.yaml"
    params:
        name=config["tokenizer"]["name"],
        vocab_size=config["tokenizer"]["vocab_size"],
        block_len=config["tokenizer"]["block_len"],
        snippet_len=config["evaluation"]["snippet_len"],
        n_snippets=config["evaluation"]["n_snippets"],
        seed=config["data"]["seed"],
        code=code_digest("tokenizer"),
    script:
        "../workflow_scripts/tokenizer.py"
