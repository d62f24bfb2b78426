rule theory:
    output:
        paths.theory_table(RESULTS),
    log:
        log_path("theory.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        seq_len=config["theory"]["seq_len"],
        alphas=config["theory"]["alphas"],
        code=code_digest("theory"),
    script:
        "../workflow_scripts/theory.py"
