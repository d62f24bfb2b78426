# The parameter-free decoder in closed form (Eq. 4) and in the large-d limit, and its Monte Carlo.


rule theory:
    output:
        paths.theory_table(RESULTS),
    log:
        log_path("theory.log"),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("theory")
    resources:
        **job_resources("theory"),
    params:
        seq_len=config["theory"]["seq_len"],
        alphas=config["theory"]["alphas"],
        code=code("theory"),
    script:
        "../workflow_scripts/job.py"


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
    threads: job_threads("recursion")
    resources:
        **job_resources("recursion"),
    params:
        variants=settings.recursion_variants(config),
        code=code("recursion"),
    script:
        "../workflow_scripts/job.py"


# Cached between workflows (cache: True, needs --cache and SNAKEMAKE_OUTPUT_CACHE): the output depends only on
# params and inputs. Snakemake allows no benchmark: on a cached rule; the job records its run time in its tables.
rule simulate:
    output:
        table=paths.simulation_table("{variant}", RESULTS),
        groups=paths.simulation_groups("{variant}", RESULTS),
    log:
        log_path("simulate/{variant}.log"),
    cache: True
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("simulate")
    resources:
        **job_resources("simulate"),
    params:
        variant=lambda wildcards: settings.recursion_variants(config)[wildcards.variant],
        device=config["device"],
        chunk_size=config["simulation"]["chunk_size"],
        code=code("simulate"),
    script:
        "../workflow_scripts/job.py"
