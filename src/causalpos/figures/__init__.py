"""Every figure, drawn from the tables: style helpers, one module per family of figures, one registry.

`figures.registry` is the one list of figure ids (with caption, report section and the tables each
reads); it imports no plotting code, so the workflow can read it while it builds the DAG.
"""
