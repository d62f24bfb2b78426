"""Rule window_test: every pretrained model with sliding-window layers (Gemma-3), each layer measured before and after
its window and predicted by the recursion of its own stack (analysis.windows, issue 25).

params.models is {name: {"location", "source"}}: its scores and groups tables are paper_llms's where they exist, else
the default run's (`source` says which)."""

from __future__ import annotations

import logging
import time

from causalpos import __version__
from causalpos.analysis.claims.replicates import LedgerInputs, group_sizes, longest_seq_len
from causalpos.analysis.windows import attention_stack, layer_rows, predicted_scores, window_frame
from causalpos.io import PartTable, write_parquet

log = logging.getLogger("causalpos")


def run(job) -> None:
    from transformers import AutoConfig

    models, settings = job.params.models, job.params.settings
    start = time.perf_counter()
    rows = []
    for (name, spec), scores_path, groups_path in zip(models.items(), job.input.scores, job.input.groups):
        stack = attention_stack(AutoConfig.from_pretrained(spec["location"]).to_dict())
        if stack is None:
            log.info("window test: %s has no sliding-window layer", name)
            continue
        scores, groups = PartTable(scores_path, "scores"), PartTable(groups_path, "groups").select(quantity="scores")
        data = LedgerInputs(None, None, scores, None, groups, settings["n_bootstrap"], settings["seed"])
        size = longest_seq_len(scores)
        predicted = predicted_scores(stack, max(size, 2 * stack.window))
        common = {
            "model": name,
            "source": spec["source"],
            "seq_len": size,
            "n_sequences": int(group_sizes(groups).sum()),
        }
        for layer in data.score_layers(name):
            field = data.score_field(name, layer)
            rows += [{**common, **r} for r in layer_rows(field, layer, stack, predicted[layer])]
            del field
        log.info(
            "window test: %s (%s tables, S = %d, window %d, %d layers) in %.0f s",
            name,
            spec["source"],
            size,
            stack.window,
            len(stack.windows),
            time.perf_counter() - start,
        )
    frame = window_frame(rows)
    write_parquet(
        frame, job.output[0], {"stage": "window_test", "models": models, "settings": settings, "version": __version__}
    )
    log.info(
        "window test: %d rows, %d models in %.1f s -> %s",
        len(frame),
        frame["model"].nunique(),
        time.perf_counter() - start,
        job.output[0],
    )
