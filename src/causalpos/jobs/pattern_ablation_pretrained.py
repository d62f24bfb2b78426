"""Rule pattern_ablation_pretrained: a pretrained LLM's loss at its extraction's length with its non-relative
pattern taken out, and the controls: the maps from `n_estimate` sequences of its own tokenizer, the losses on
`n_evaluate` others (models.intervention)."""

from __future__ import annotations

import logging
import time

from causalpos import __version__
from causalpos.corpus.sequences import TooFewSequences, llm_sequences, load_tokenizer_for_extraction
from causalpos.io import read_table, write_parquet
from causalpos.models.intervention import ABLATION_ATTENTION, ablate_pretrained
from causalpos.models.pretrained import bos_prefix, load_for_extraction
from causalpos.runtime.devices import resolve_device

log = logging.getLogger("causalpos")


def run(job) -> None:
    p, name = job.params, job.wildcards.model
    settings, location = p.settings, str(p.location)
    start = time.perf_counter()
    setting = f"extraction.pretrained.models.{name}"
    tokenizer = load_tokenizer_for_extraction(location, setting)
    try:
        tokens, _ = llm_sequences(
            read_table(job.input.documents),
            tokenizer,
            settings["seq_len"],
            p.n_estimate + p.n_evaluate,
            seed=p.seed,
            splits=settings["splits"],
            setting=settings["setting"],
            prefix=bos_prefix(tokenizer),
            strict=True,
        )
    except TooFewSequences as err:
        raise TooFewSequences(
            f"pattern ablation of {name}: evaluation.ablation_sequences + "
            f"evaluation.length_sequences = {p.n_estimate + p.n_evaluate} sequences wanted; {err}"
        ) from None
    device = resolve_device(p.device, "extraction.device")
    model, _ = load_for_extraction(location, setting, device, ABLATION_ATTENTION, with_tokenizer=False)
    frame = ablate_pretrained(model, tokens, name, p.n_estimate, p.seed, settings["batch_size"], device)
    write_parquet(
        frame,
        job.output[0],
        {
            "stage": "pattern_ablation_pretrained",
            "location": location,
            "settings": settings,
            "device": str(device),
            "seconds": time.perf_counter() - start,
            "version": __version__,
        },
    )
    log.info("pattern ablation %s in %.1f s:\n%s", name, time.perf_counter() - start, frame.to_string(index=False))
