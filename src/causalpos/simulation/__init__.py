"""The parameter-free decoder of Eq. 1: closed forms (theory), its large-d limit at every layer (recursion), inputs
(sampling), the Monte Carlo engine.

Stage order of the DAG: theory, recursion, simulate. Imports only the bottom layer (io, tables, devices, matrices).
"""
