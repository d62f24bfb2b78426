"""The claims ledger: every claim of the paper as a measured number, its uncertainty and a verdict.

catalogue (the claims, thresholds and verdict rule), replicates (inputs and their bootstrap),
rows (one ledger row), simulation (claims 1-6) and models (claims 7-8): the builders, ledger
(build_ledger, ledger_markdown). A new claim goes into simulation.py or models.py with its
statement in catalogue.CLAIMS and its threshold in catalogue.THRESHOLDS.
"""
