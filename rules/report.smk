# `snakemake --report report.html`: every figure (rules figure, model_figure, claims, ...), the claims, the
# configuration and the run times.


rule runtimes:
    input:
        # a file of each benchmarked job, whose metadata names its device (its benchmark, a param below, is read
        # but not an input: a missing timing is reported missing, and never makes Snakemake rerun the job)
        train_metrics=[paths.table_file("metrics", RESULTS, model=m) for m in TRAINED],
        emergence_scores=[
            paths.emergence_table(m, "scores", RESULTS) for m in TRAINED if SNAPSHOTS
        ],
        recursion_table=[paths.recursion_table(RESULTS)],
        # the cached rules record their run times in their tables' metadata
        simulate=[paths.simulation_table(v, RESULTS) for v in VARIANTS],
        extract=[paths.activation_table(m, "scores", RESULTS) for m in EXTRACTED],
    output:
        table=paths.table_file("runtimes", RESULTS),
        html=report(
            paths.summary_file("runtimes.html", RESULTS),
            caption="../report/runtimes.rst",
            category="Runtimes",
        ),
    log:
        log_path("runtimes.log"),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("runtimes")
    resources:
        **job_resources("runtimes"),
    params:
        benchmarks={
            "train": [paths.train_benchmark(m, RESULTS) for m in TRAINED],
            "emergence": [
                paths.emergence_benchmark(m, RESULTS) for m in TRAINED if SNAPSHOTS
            ],
            "recursion": [paths.recursion_benchmark(RESULTS)],
        },
        model_labels=settings.model_labels(config),
        code=code("runtimes"),
        upstream=upstream("runtimes"),
    script:
        "../workflow_scripts/job.py"


# Snakemake 9's HTML report does not show the config files; this page does, with every default the schema filled in.
rule config_record:
    output:
        report(
            paths.summary_file("config.html", RESULTS),
            caption="../report/config.rst",
            category="Configuration",
        ),
    log:
        log_path("config_record.log"),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("config_record")
    resources:
        **job_resources("config_record"),
    params:
        config=config,
        code=code("config_record"),
    script:
        "../workflow_scripts/job.py"


# The software the run used, beside its results: a package that changes reruns this record.
rule environment:
    output:
        paths.table_file("environment", RESULTS),
    log:
        log_path("environment.log"),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("environment")
    resources:
        **job_resources("environment"),
    params:
        versions=settings.software_versions(),
        code=code("environment"),
    script:
        "../workflow_scripts/job.py"
