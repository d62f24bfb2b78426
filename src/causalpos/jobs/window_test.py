"""Rule window_test: every pretrained model with sliding-window layers (Gemma-3), each layer measured before and after
its window and predicted by the recursion of its own stack (analysis.windows, issue 25).

params.models is {name: {"location", "source", "lifted"}}: its scores and groups tables are target window_control's
windowed arm where both arms exist, else paper_llms's where they exist, else the default run's (`source` says which);
with `lifted`, the lifted arm's tables (input.lifted_scores, lifted_groups: those models in order) give the arm
`lifted` and the window's own effect (arm `difference`, issue 43)."""

from __future__ import annotations

import logging
import time

from causalpos import __version__
from causalpos.analysis.claims.replicates import LedgerInputs, group_sizes, longest_seq_len
from causalpos.analysis.windows import (
    attention_stack,
    difference_rows,
    layer_rows,
    lifted_stack,
    predicted_scores,
    window_frame,
)
from causalpos.catalogue.models import LIFTED, WINDOWED
from causalpos.io import PartTable, write_parquet

log = logging.getLogger("causalpos")


def run(job) -> None:
    from transformers import AutoConfig

    models, settings = job.params.models, job.params.settings
    start = time.perf_counter()
    rows = []
    lifted_files = iter(zip(job.input.get("lifted_scores", []), job.input.get("lifted_groups", [])))
    for (name, spec), scores_path, groups_path in zip(models.items(), job.input.scores, job.input.groups):
        lifted_paths = next(lifted_files) if spec.get("lifted") else None
        stack = attention_stack(AutoConfig.from_pretrained(spec["location"]).to_dict())
        if stack is None:
            log.info("window test: %s has no sliding-window layer", name)
            continue
        arms = {WINDOWED: (scores_path, groups_path, stack)}
        if lifted_paths is not None:
            arms[LIFTED] = (*lifted_paths, lifted_stack(stack))
        by_arm, size = {}, None
        for arm, (scores_file, groups_file, arm_stack) in arms.items():
            scores = PartTable(scores_file, "scores")
            groups = PartTable(groups_file, "groups").select(quantity="scores")
            # the same name and seed in both arms: the same draws of the same groups (a paired bootstrap)
            data = LedgerInputs(None, None, scores, None, groups, settings["n_bootstrap"], settings["seed"])
            size = longest_seq_len(scores)
            predicted = predicted_scores(arm_stack, max(size, 2 * stack.window))
            common = {
                "model": name,
                "source": spec["source"],
                "arm": arm,
                "seq_len": size,
                "n_sequences": int(group_sizes(groups).sum()),
                "n_groups": len(group_sizes(groups)),
            }
            by_arm[arm] = {}
            for layer in data.score_layers(name):
                field = data.score_field(name, layer)
                by_arm[arm][layer] = [{**common, **r} for r in layer_rows(field, layer, stack, predicted[layer])]
                rows += by_arm[arm][layer]
                del field
        if LIFTED in by_arm:
            for layer, windowed in by_arm[WINDOWED].items():
                rows += difference_rows(windowed, by_arm[LIFTED].get(layer, []))
        log.info(
            "window test: %s (%s tables, %s, S = %d, window %d, %d layers) in %.0f s",
            name,
            spec["source"],
            " and ".join(by_arm),
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
