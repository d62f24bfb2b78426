# Section 4.2's corpus, its tokenizer, the trained models' token blocks and the evaluation snippets.


rule sample:
    output:
        paths.documents(RESULTS),
    log:
        log_path("sample.log"),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("sample")
    resources:
        **job_resources("sample"),
    params:
        sources=config["data"]["sources"],
        heldout_fraction=config["data"]["heldout_fraction"],
        seed=config["data"]["seed"],
        max_documents=config["data"]["max_documents"],
        code=code("sample"),
    script:
        "../workflow_scripts/job.py"


rule tokenizer:
    input:
        documents=rules.sample.output[0],
    output:
        tokenizer=f"{paths.tokenizer_dir(RESULTS)}/tokenizer.json",
        tokenizer_config=f"{paths.tokenizer_dir(RESULTS)}/tokenizer_config.json",
        train=paths.tokens_file("train.npy", RESULTS),
        heldout=paths.tokens_file("heldout.npy", RESULTS),
        blocks=paths.table_file("blocks", RESULTS),
        snippets=paths.tokens_file("snippets.npy", RESULTS),
        snippet_documents=paths.table_file("snippets", RESULTS),
    log:
        log_path("tokenizer.log"),
    cache: True  # between workflows (see rule simulate)
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("tokenizer")
    resources:
        **job_resources("tokenizer"),
    params:
        name=config["tokenizer"]["name"],
        vocab_size=config["tokenizer"]["vocab_size"],
        block_len=config["tokenizer"]["block_len"],
        snippet_len=config["evaluation"]["snippet_len"],
        n_snippets=config["evaluation"]["n_snippets"],
        seed=config["data"]["seed"],
        code=code("tokenizer"),
        upstream=upstream("tokenizer"),
    script:
        "../workflow_scripts/job.py"
