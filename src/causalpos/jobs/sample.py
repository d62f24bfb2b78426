"""Rule sample: documents sampled from the configured corpora (corpus.documents), split train / held-out, to
Parquet."""

from __future__ import annotations

import logging

from causalpos import __version__
from causalpos.corpus.documents import sample_documents, summarize
from causalpos.io import write_parquet

log = logging.getLogger("causalpos")


def run(job) -> None:
    p = job.params
    documents = sample_documents(
        p.sources, heldout_fraction=p.heldout_fraction, seed=p.seed, max_documents=p.max_documents
    )
    write_parquet(
        documents,
        job.output[0],
        {
            "stage": "sample",
            "sources": p.sources,
            "seed": p.seed,
            "heldout_fraction": p.heldout_fraction,
            "version": __version__,
        },
    )
    log.info("documents per source and split:\n%s", summarize(documents).to_string(index=False))
    log.info("sample: %d documents -> %s", len(documents), job.output[0])
