"""Rule extract: every layer's attention scores, Figure 3's intermediates, the position probe and each head's map of
one model, to Parquet (models.extract).

A trained model (the nope / rope folder) runs on the evaluation snippets; a pretrained one (a folder or hub id) on
documents of its `splits` in its own tokenizer (or on a content control's sequences: settings["condition"]), the
sequences chosen, and too few of them refused, before the model
is loaded. With `state` a killed run restarts from its last completed group of sequences."""

from __future__ import annotations

import logging
import sys
import time

from causalpos import __version__
from causalpos.corpus.conditions import condition_sequences
from causalpos.corpus.sequences import load_tokenizer_for_extraction, sequence_counts
from causalpos.io import read_array, read_table
from causalpos.models.extract import ATTENTION_NAME, extract_to_files
from causalpos.models.pretrained import bos_prefix, load_for_extraction
from causalpos.runtime.devices import resolve_device

log = logging.getLogger("causalpos")


def run(job) -> None:
    p, name = job.params, job.wildcards.model
    settings, location = p.settings, str(p.location)
    pretrained = settings["kind"] == "pretrained"  # trained models read token ids: no tokenizer needed
    lift = bool(settings.get("lift_windows", False))  # target window_control's lifted arm
    setting = f"extraction.pretrained.models.{name}" if pretrained else f"model {name}"
    device = resolve_device(p.device, "extraction.device")
    meta = {
        "stage": "extract",
        "model": name,
        "location": location,
        "settings": settings,
        "device": str(device),
        "version": __version__,
    }
    if not pretrained:
        tokens = read_array(job.input.tokens)
    else:
        tokenizer = load_tokenizer_for_extraction(location, setting)
        # Section 5.2's documents, or a content control's sequences (target mask_controls; corpus.conditions)
        condition = settings.get("condition", "documents")
        tokens, table = condition_sequences(
            condition,
            read_table(job.input.documents),
            tokenizer,
            settings["seq_len"],
            settings["n_sequences"],
            seed=p.seed,
            splits=settings["splits"],
            setting=settings["setting"],
            prefix=bos_prefix(tokenizer),
        )
        meta["condition"] = condition
        meta["lift_windows"] = lift
        # which documents the sequences are, and how many of each source and split (docs/models.md)
        meta["sequences"] = {"counts": sequence_counts(table), "doc_ids": table["doc_id"].tolist()}
        log.info("extract %s: sequences by source and split: %s", name, meta["sequences"]["counts"])
    started = time.perf_counter()
    model, _ = load_for_extraction(location, setting, device, ATTENTION_NAME, with_tokenizer=False, lift_windows=lift)
    log.info(
        "extract %s: %s loaded from %s on %s in %.1f s",
        name,
        type(model).__name__,
        location,
        device,
        time.perf_counter() - started,
    )
    log.info("extract %s: %d sequences of %d tokens, batch %d", name, *tokens.shape, settings["batch_size"])
    outputs = dict(job.output.items())
    seconds = extract_to_files(
        model,
        tokens,
        name,
        settings["kind"],
        outputs,
        metadata=meta,
        state_dir=p.state,
        code=p.get("code", ""),
        progress=sys.stderr.isatty(),
        batch_size=settings["batch_size"],
        intermediates_layer=settings["intermediates_layer"],
        probe_sequences=settings["probe_sequences"],
        probe_positions=settings["probe_positions"],
        seed=p.seed,
        n_groups=settings["bootstrap_groups"],
        per_head=settings.get("per_head", False),
    )
    log.info(
        "extract %s: %.1f s (%.0f tokens/s) -> %s",
        name,
        seconds,
        tokens.size / seconds,
        ", ".join(map(str, outputs.values())),
    )
