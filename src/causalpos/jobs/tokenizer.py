"""Rule tokenizer: train (tokenizer.name null) or load the tokenizer, save it, and write the token blocks of the
trained models and the evaluation snippets (corpus.tokens)."""

from __future__ import annotations

import logging
import os
import time

from causalpos.corpus.tokens import load_tokenizer, train_bpe, write_snippets, write_token_blocks
from causalpos.io import read_table

log = logging.getLogger("causalpos")


def run(job) -> None:
    p = job.params
    documents = read_table(job.input.documents)
    start = time.perf_counter()
    if p.name is None:
        tokenizer = train_bpe(documents.loc[documents["split"] == "train", "text"], vocab_size=p.vocab_size)
        log.info("tokenizer: byte-level BPE, vocab %d, trained in %.1f s", len(tokenizer), time.perf_counter() - start)
    else:
        tokenizer = load_tokenizer(p.name)
        log.info("tokenizer: %s, vocab %d", p.name, len(tokenizer))
    tokenizer.save_pretrained(os.path.dirname(job.output.tokenizer))
    tokens_dir = os.path.dirname(job.output.blocks)
    info = write_token_blocks(documents, tokenizer, p.block_len, tokens_dir)
    write_snippets(
        documents, tokenizer, job.output.snippets, snippet_len=p.snippet_len, n_snippets=p.n_snippets, seed=p.seed
    )
    log.info(
        "tokens: train unigram entropy %.3f nats/token; %s",
        info["train_unigram_entropy"],
        {k: v["n_blocks"] for k, v in info["splits"].items()},
    )
