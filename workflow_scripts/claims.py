# Snakemake adapter for rules claims and paper_llms_claims: read the job, call the library.
import os

from causalpos.workflow.process_control import JobLog
from causalpos.workflow.runners import run_claims

with JobLog(snakemake.log[0]):
    run_claims(
        {name: list(snakemake.input[name]) for name in snakemake.input.keys()},
        table=snakemake.output.table,
        markdown=snakemake.output.markdown,
        folder=os.path.dirname(snakemake.output.figures[0]),  # the folder of the pages snakemake.output.figures names
        **snakemake.params.kwargs,
    )
