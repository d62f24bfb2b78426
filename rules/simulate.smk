rule simulate:
    output:
        paths.simulation_table("{variant}", RESULTS),
    log:
        log_path("simulate/{variant}.log"),
    cache: True  # between workflows; no benchmark: allowed (see rule pretrained)
    conda:
        "../envs/causalpos.yaml"
    threads: config["simulation"]["threads"]
    resources:
        mem_mb=2048,
    params:
        variant=variant_settings,
        device=config["device"],
        chunk_size=config["simulation"]["chunk_size"],
        code=code_digest("simulate"),
    script:
        "../workflow_scripts/simulate.py"
