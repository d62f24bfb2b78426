# Issue 13: Section 5.2 at the paper's size, `snakemake --cores 8 paper_llms`: every model of
# extraction.pretrained.models on extraction.paper_llms's sequences (1,000 x 1,024 tokens by default),
# the same LLM figures and claim 8's ledger rows, and the convergence table, all under PAPER
# (results/paper_llms): the default run's files are never written. The rules are the default run's
# with their own outputs, inputs and params (stages paper_llms_* of workflow/dag.py); the helpers
# (PAPER, PRETRAINED, PAPER_FIGURES) are in rules/common.smk.


rule paper_llms:
    input:
        paper_llms_outputs(),


use rule extract_pretrained as paper_llms_extract with:
    input:
        unpack(job_inputs("paper_llms_extract")),
    output:
        **paths.activation_tables("{model}", PAPER),
    log:
        log_path("paper_llms/extract/{model}.log"),
    wildcard_constraints:
        model=stage_models("paper_llms_extract"),
    resources:
        mem_mb=16384,
    params:
        **stage_params("paper_llms_extract"),
        state=paths.extraction_state_dir("{model}", PAPER),


use rule figure as paper_llms_figure with:
    input:
        unpack(job_inputs("paper_llms_figure")),
    output:
        paths.figure_files("{figure}", FORMATS, PAPER),
    log:
        log_path("paper_llms/figures/{figure}.log"),
    wildcard_constraints:
        figure=PAPER_FIGURE,
    params:
        **stage_params("paper_llms_figure"),


use rule model_figure_pretrained as paper_llms_model_figure with:
    input:
        **stage_inputs("paper_llms_model_figure"),
    output:
        directory(paths.all_layers_dir("{model}", PAPER)),
    log:
        log_path("paper_llms/figures/fig_all_layers_{model}.log"),
    wildcard_constraints:
        model=stage_models("paper_llms_model_figure"),
    params:
        **stage_params("paper_llms_model_figure"),


use rule convergence as paper_llms_convergence with:
    input:
        **stage_inputs("paper_llms_convergence"),
    output:
        table=paths.summary_file("convergence.parquet", PAPER),
        figures=paths.figure_files(CONVERGENCE_FIGURE, FORMATS, PAPER),
    log:
        log_path("paper_llms/convergence.log"),
    resources:
        # 9 GB seen for 2 models x 1,000 x 1,024 tokens on a 2-core CPU
        mem_mb=20480,
    params:
        **stage_params("paper_llms_convergence"),


use rule claims as paper_llms_claims with:
    input:
        **stage_inputs("paper_llms_claims"),
    output:
        table=paths.summary_file("claims.parquet", PAPER),
        markdown=paths.summary_file("claims.md", PAPER),
        # the pages that show claim 8 (catalogue.ledger_pages)
        figures=claims_figure_files(PAPER, PAPER_CLAIM),
    log:
        log_path("paper_llms/claims.log"),
    resources:
        # 14 GB seen for 2 models x 1,000 x 1,024 tokens on a 2-core CPU
        mem_mb=20480,
    params:
        **stage_params("paper_llms_claims"),
