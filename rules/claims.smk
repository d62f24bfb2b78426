# Issue 6: every claim of the paper as a measured verdict, from the other rules' Parquet results: the default run's
# ledger (results/summary), claim 8's at the paper's size (results/paper_llms/summary), claim 11's over every
# training seed (results/seeds/summary) and claim 12's on the content controls (results/controls/summary).


rule claims:
    input:
        unpack(claims_inputs),
    output:
        table=paths.table_file("claims", "{results}"),
        markdown=paths.summary_file("claims.md", "{results}"),
        # one page per part of the paper (catalogue.claims.PAGES; only its claim's in paper_llms and seeds)
        figures=report_folder(
            figure_paths.claims_dir("{results}"),
            CLAIMS_PAGE,
            "Claims",
            CLAIMS_FIGURE,
            claims_page_labels,
        ),
    log:
        log_path("claims.log", "{results}"),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("claims")
    resources:
        **job_resources("claims"),
    params:
        settings=config["claims"],
        options=settings.plot_options(config),
        claim=lambda wildcards: CLAIM_OF[wildcards.results],
        # the conditions of the control_scores and control_groups inputs, in order (claim 12's ledger)
        conditions=lambda wildcards: (
            CONDITIONS if wildcards.results == CONTROLS_ROOT else []
        ),
        code=code("claims"),
        upstream=upstream("claims"),
    script:
        "../workflow_scripts/job.py"


# Issue 13: claim 8 (the pretrained LLMs) on the first groups of sequences, N = all, all / 2, ...: do the verdicts hold
# as N grows? Rule claims notes a verdict that changes.
rule convergence:
    input:
        **extraction_tables(PRETRAINED, "{results}", ("scores", "groups")),
    output:
        table=paths.table_file("convergence", "{results}"),
        figures=report_figures(CONVERGENCE_FIGURE, category="Claims"),
    log:
        log_path("convergence.log", "{results}"),
    wildcard_constraints:
        results=one_of([RESULTS, PAPER]),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("convergence")
    resources:
        **job_resources("convergence"),
    params:
        settings=config["claims"],
        options=settings.plot_options(config),
        code=code("convergence"),
        upstream=upstream("convergence"),
    script:
        "../workflow_scripts/job.py"


# Issue 25: the sliding-window layers of the pretrained LLMs (Gemma-3) before and after their window, against the
# recursion of their own stack; paper_llms's tables where they exist (queries past the window), else the default
# run's. Claim 10d-10e read it. In results/windows (target window_control, issue 43): each model of
# extraction.window_control with its windows as trained and lifted, and the window's own effect.
rule window_test:
    input:
        unpack(window_test_inputs),
    output:
        paths.table_file("window_test", "{results}"),
    log:
        log_path("window_test.log", "{results}"),
    wildcard_constraints:
        results=one_of([RESULTS, WINDOWS_ROOT]),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("window_test")
    resources:
        **job_resources("window_test"),
    params:
        models=lambda wildcards: settings.window_test_models(config, wildcards.results),
        settings={key: config["claims"][key] for key in ("n_bootstrap", "seed")},
        code=code("window_test"),
        upstream=upstream("window_test"),
    script:
        "../workflow_scripts/job.py"


# Issue 43: claim 8's metrics of every pretrained LLM on the content controls' sequences beside its documents', in one
# table (three more extractions per LLM, each control's under results/controls/<condition>). Part of target
# mask_controls (Snakefile), with claim 12's ledger (rule claims in results/controls), not of `all`.
rule controls_table:
    input:
        unpack(control_tables),
    output:
        table=paths.table_file("mask_controls", RESULTS),
        figures=report_figures(MASK_CONTROLS_FIGURE, RESULTS, category="Claims"),
    log:
        log_path("controls_table.log"),
    conda:
        "../envs/causalpos.yaml"
    threads: job_threads("controls_table")
    resources:
        **job_resources("controls_table"),
    params:
        conditions=CONDITIONS,
        models=PRETRAINED,
        settings={key: config["claims"][key] for key in ("n_bootstrap", "seed")},
        options=settings.plot_options(config),
        code=code("controls_table"),
        upstream=upstream("controls_table"),
    script:
        "../workflow_scripts/job.py"
