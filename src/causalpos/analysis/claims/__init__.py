"""The claims ledger: every claim of the paper as a measured number, its uncertainty and a verdict.

catalogue (the claims, thresholds and verdict rule), family (p-values and their Holm adjustment), replicates
(inputs, their bootstrap and the input law), rows (one ledger row); the builders: simulation (claims 1a-1b,
2-6), closed_forms (1c-1f, Appendix A), models (7a-7c, 8), stages (7d-7j, Figure 3's stages), robustness (9a,
the input law); ledger (build_ledger, ledger_markdown). A new claim goes into the module of its subject (a new
module rather than one past 700 lines), its record (a Claim) in catalogue.CLAIMS and a new threshold in
catalogue.THRESHOLDS.
"""
