rule theory:
    output:
        THEORY_TABLE,
    params:
        seq_len=config["theory"]["seq_len"],
        alphas=config["theory"]["alphas"],
        code=code_digest("theory"),
    log:
        "logs/theory.log",
    script:
        "../workflow_scripts/theory.py"
