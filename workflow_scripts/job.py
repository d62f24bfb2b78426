# The script of every rule: run the rule's job module (causalpos.jobs.<rule>) on this job, inside its log
# (causalpos.workflow.job.run_job).
# First of all, end with Snakemake (a kill -9 of it included): the job's imports take seconds, and a job that
# outlived its Snakemake would write results behind its back.
from causalpos.runtime.processes import stop_with_parent

stop_with_parent()

from causalpos.workflow.job import run_job  # noqa: E402

run_job(snakemake)
