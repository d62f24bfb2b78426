"""The parameter-free decoder of Eq. 1: closed forms (theory), inputs (sampling), the Monte Carlo engine.

Stage order of the DAG: theory, simulate. Imports only the bottom layer (io, tables, devices, matrices).
"""
