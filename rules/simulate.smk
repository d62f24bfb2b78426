rule simulate:
    output:
        table=paths.simulation_table("{variant}", RESULTS),
        groups=paths.simulation_groups("{variant}", RESULTS),
    log:
        log_path("simulate/{variant}.log"),
    cache: True  # between workflows; no benchmark: allowed (see rule pretrained)
    conda:
        "../envs/causalpos.yaml"
    threads: config["simulation"]["threads"]
    resources:
        mem_mb=2048,
    params:
        **stage_params("simulate"),
    script:
        "../workflow_scripts/simulate.py"
