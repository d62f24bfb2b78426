"""The catalogues: the records every other layer reads, plain data.

tables (one record per result table: path, columns, meaning), columns (what each column means), paths (every
result's path, from the tables' records), figures (one record per figure: what it reads, how it is drawn, its
caption), models (the trained models' records and the one test of a model's kind), claims (one record per claim:
statement, threshold, the code that measures it), thresholds (one record per threshold: default and bounds).
A lower layer: it imports the standard library, numpy and pandas and causalpos's base modules only.
scripts/generate-docs.py writes the docs' tables from it.
"""
