"""Numbers drawn from the other stages' tables: the per-layer summary, the claims ledger, run times.

Reads tables only (never runs a model). Imports the bottom layer and simulation.theory.
"""
