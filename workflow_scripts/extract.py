# Snakemake adapter for rules extract and paper_llms_extract: read the job, call the library.

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_extract

with JobLog(snakemake.log[0]):
    run_extract(
        snakemake.wildcards.model,
        outputs=dict(snakemake.output.items()),
        documents=snakemake.input.get("documents"),
        snippets=snakemake.input.get("tokens"),
        state_dir=snakemake.params.state,
        **snakemake.params.kwargs,
    )
