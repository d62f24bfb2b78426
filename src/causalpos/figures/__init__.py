"""Every figure, drawn from the tables: style helpers and one module per family of figures.

The figures' records (id, report section, the tables each reads, its drawing function and its caption) are
causalpos.catalogue.figures, which imports no plotting code, so the workflow can read it while it builds the
DAG; figures.render draws a figure by its id.
"""
