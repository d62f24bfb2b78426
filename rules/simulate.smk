rule simulate:
    output:
        "results/simulation/{variant}.parquet",
    params:
        variant=variant_settings,
        device=config["device"],
        chunk_size=config["simulation"]["chunk_size"],
        code=code_digest("simulate"),
    threads: config["simulation"]["threads"]
    resources:
        mem_mb=2048,
    log:
        "logs/simulate/{variant}.log",
    benchmark:
        "benchmarks/simulate/{variant}.tsv"
    script:
        "../workflow_scripts/simulate.py"
