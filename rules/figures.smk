# Every figure of config's `figures:` from the Parquet results (catalogue.figures: what each reads, how it is
# drawn); target paper_llms draws the pretrained LLMs' figures again in its own folder.


rule figure:
    input:
        unpack(figure_inputs),
    output:
        report_figures("{figure}"),
    log:
        log_path("figures/{figure}.log", "{results}"),
    wildcard_constraints:
        results=one_of([RESULTS, PAPER]),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("figure")
    resources:
        **job_resources("figure"),
    params:
        options=lambda wildcards: settings.figure_options(config, wildcards.figure),
        code=code("figure"),
        upstream=upstream("figure"),
    script:
        "../workflow_scripts/job.py"
