"""What one job of each rule runs: one module per rule of rules/*.smk, named as the rule.

Each module has `run(job)`: `job` is Snakemake's `snakemake` object, or causalpos.workflow.job.Job where Snakemake
is not the caller, and the module reads `job.input`, `job.output`, `job.params`, `job.wildcards` and `job.threads`
as the rule names them. A rule's `code` param is the digest of its module and what that imports
(workflow.digest), so an edit of the code a rule runs reruns the rule, and nothing else does.
"""
