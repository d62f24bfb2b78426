# Issue 13: Section 5.2 at the paper's size, `snakemake --cores 8 paper_llms`: every model of
# extraction.pretrained.models on extraction.paper_llms's sequences (1,000 x 1,024 tokens by default),
# the same LLM figures and claim 8's ledger rows, and the convergence table, all under PAPER
# (results/paper_llms): the default run's files are never written. The rules reuse the default
# run's scripts; paths come from workflow/paths.py with PAPER as the results folder; the
# helpers (PAPER, PRETRAINED, PAPER_FIGURES, the input functions) are in rules/common.smk.


rule paper_llms:
    input:
        paper_llms_outputs(),


rule paper_llms_extract:
    input:
        unpack(extraction_inputs),
    output:
        **paths.activation_tables("{model}", PAPER),
    log:
        log_path("paper_llms/extract/{model}.log"),
    wildcard_constraints:
        model=PAPER_MODEL,
    conda:
        "../envs/causalpos.yaml"
    threads: config["simulation"]["threads"]
    resources:
        mem_mb=16384,
    params:
        settings=paper_settings_param,
        location=model_location_param,
        device=config["extraction"]["device"],
        seed=config["data"]["seed"],
        state=paths.extraction_state_dir("{model}", PAPER),
        code=code_digest("extract"),
        upstream=upstream_of("paper_llms_extract"),
    script:
        "../workflow_scripts/extract.py"


rule paper_llms_figure:
    input:
        unpack(paper_figure_inputs),
    output:
        paths.figure_files("{figure}", FORMATS, PAPER),
    log:
        log_path("paper_llms/figures/{figure}.log"),
    wildcard_constraints:
        figure=PAPER_FIGURE,
    conda:
        "../envs/causalpos.yaml"
    params:
        options=paper_figure_options,
        code=code_digest("plot"),
        upstream=upstream_of("paper_llms_figure"),
    script:
        "../workflow_scripts/plot.py"


rule paper_llms_model_figure:
    input:
        scores=paths.activation_table("{model}", "scores", PAPER),
    output:
        directory(paths.all_layers_dir("{model}", PAPER)),
    log:
        log_path("paper_llms/figures/fig_all_layers_{model}.log"),
    wildcard_constraints:
        model=PAPER_MODEL,
    conda:
        "../envs/causalpos.yaml"
    params:
        options=model_figure_options,
        code=code_digest("plot"),
        upstream=upstream_of("paper_llms_model_figure"),
    script:
        "../workflow_scripts/model_figure.py"


rule paper_llms_convergence:
    input:
        **PAPER_CONVERGENCE_INPUTS,
    output:
        table=paths.summary_file("convergence.parquet", PAPER),
        figures=paths.figure_files(CONVERGENCE_FIGURE, FORMATS, PAPER),
    log:
        log_path("paper_llms/convergence.log"),
    conda:
        "../envs/causalpos.yaml"
    resources:
        # 9 GB seen for 2 models x 1,000 x 1,024 tokens on a 2-core CPU
        mem_mb=20480,
    params:
        settings=config["claims"],
        options=config["plot"],
        code=code_digest("convergence"),
        upstream=upstream_of("paper_llms_convergence"),
    script:
        "../workflow_scripts/convergence.py"


rule paper_llms_claims:
    input:
        **PAPER_CLAIMS_INPUTS,
    output:
        table=paths.summary_file("claims.parquet", PAPER),
        markdown=paths.summary_file("claims.md", PAPER),
        # the pages that show claim 8 (catalogue.ledger_pages)
        figures=claims_figure_files(PAPER, PAPER_CLAIM),
    log:
        log_path("paper_llms/claims.log"),
    conda:
        "../envs/causalpos.yaml"
    resources:
        # 14 GB seen for 2 models x 1,000 x 1,024 tokens on a 2-core CPU
        mem_mb=20480,
    params:
        settings=config["claims"],
        options=config["plot"],
        claim=PAPER_CLAIM,
        code=code_digest("claims"),
        upstream=upstream_of("paper_llms_claims"),
    script:
        "../workflow_scripts/claims.py"
