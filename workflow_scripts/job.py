# The script of every rule: run the rule's job module (causalpos.jobs.<rule>) on this job, inside its log
# (causalpos.workflow.job.run_job).
from causalpos.workflow.job import run_job

run_job(snakemake)
