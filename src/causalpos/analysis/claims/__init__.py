"""The claims ledger: every claim of the paper as a measured number, its uncertainty and a verdict.

family (p-values and their Holm adjustment), replicates (inputs, their bootstrap and the input law), rows (one
ledger row); the builders: simulation_claims (claims 1a-1b, 2-6), closed_forms (1c-1f, Appendix A),
later_layers (2d-2e, 3d), model_claims (7a-7c, 8), figure3_claims (7d-7n, Figure 3's stages), robustness (9a,
the input law), large_d (10), ablation_claims (11); ledger (build_ledger, ledger_markdown). The claims, their
thresholds and the verdict rule are records of causalpos.catalogue (claims, thresholds). A new claim goes into
the module of its subject (a new module rather than one past 700 lines), its record (a Claim, naming that
builder in measured_by) in catalogue.claims.CLAIMS and a new threshold in catalogue.thresholds.
"""
