rule theory:
    output:
        paths.theory_table(RESULTS),
    log:
        log_path("theory.log"),
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("theory"),
    script:
        "../workflow_scripts/theory.py"


# Every simulation variant in the large-d limit (simulation.recursion), one table; seconds.
rule recursion:
    output:
        paths.recursion_table(RESULTS),
    log:
        log_path("recursion.log"),
    benchmark:
        paths.recursion_benchmark(RESULTS)
    conda:
        "../envs/causalpos.yaml"
    params:
        **stage_params("recursion"),
    script:
        "../workflow_scripts/recursion.py"
