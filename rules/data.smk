rule sample:
    output:
        paths.documents(RESULTS),
    log:
        log_path("sample.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("sample"),
    script:
        "../workflow_scripts/sample.py"


rule tokenizer:
    input:
        **stage_inputs("tokenizer"),
    output:
        tokenizer=f"{paths.tokenizer_dir(RESULTS)}/tokenizer.json",
        tokenizer_config=f"{paths.tokenizer_dir(RESULTS)}/tokenizer_config.json",
        train=paths.tokens_file("train.npy", RESULTS),
        heldout=paths.tokens_file("heldout.npy", RESULTS),
        blocks=paths.tokens_file("blocks.json", RESULTS),
        snippets=paths.tokens_file("snippets.npy", RESULTS),
        snippet_documents=paths.tokens_file("snippets.parquet", RESULTS),
    log:
        log_path("tokenizer.log"),
    cache: True  # between workflows; no benchmark: allowed (see rule pretrained)
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("tokenizer"),
    script:
        "../workflow_scripts/tokenizer.py"
