"""One function per workflow stage (workflow.dag names each stage's runner). The Snakemake scripts and the
CLI both call these; a runner's source and the modules it imports make its stage's code digest.

A runner that reads other stages' files moves a damaged one aside with a message naming the rule that
rebuilds it (`rebuilds_damaged_inputs`). What a job process needs around its runner (its log file, stopping
with Snakemake) is in workflow.process_control.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sys
import time
from pathlib import Path

from causalpos import __version__
from causalpos.runtime.devices import available_cpus, resolve_device
from causalpos.io import DamagedFileError, PartTable, move_aside, read_array, read_table, read_tables, write_parquet
from causalpos.workflow.digest import code_digest

log = logging.getLogger("causalpos")
PART_TABLES = ("scores", "groups")  # the ledger's inputs read a part at a time (io.PartTable), not whole


def rebuilds_damaged_inputs(runner):
    """Wrap a runner that reads other stages' files: a damaged one is renamed to <name>.damaged (kept for
    a look; missing, so Snakemake reruns the rule that writes it) and the error says which rule that is.
    Without this the file stays, every run fails on it again, and each failed job deletes its outputs."""

    @functools.wraps(runner)
    def run(*args, **kwargs):
        try:
            return runner(*args, **kwargs)
        except DamagedFileError as err:
            raise _moved_aside(err) from err

    return run


def _moved_aside(err: DamagedFileError) -> DamagedFileError:
    """Move the damaged file aside and say what reruns it. A file inside a directory() output (a snapshot, a
    converted pretrained model) goes with its whole folder; a model's or tokenizer's file that its rule does
    not declare (models.model_files: generation_config.json) with the folder's file that it does. A model
    folder that no rule writes (the config's `path:`) is the user's: left where it is."""
    from causalpos.workflow.dag import stage_writing  # not at the top: it would enter every stage's code digest

    rule = stage_writing(err.path)
    # a model's or tokenizer's file (models.model_files): `companion` is its folder's file that the rule declares
    companion = getattr(err, "companion", None)
    if rule is None and hasattr(err, "companion"):  # a model folder the config names (path:), not a result
        return DamagedFileError(err.path, err.reason, "no rule of the workflow writes it: replace it.")
    folder, rebuilt = os.path.dirname(err.path), "it"
    if rule and stage_writing(folder) == rule:  # inside a directory() output, whose files Snakemake does not check
        from causalpos.models.model_files import move_folder_aside

        link = os.readlink(folder) if os.path.islink(folder) else None
        advice = f"moved its folder {folder} (an output of rule {rule}) to {move_folder_aside(folder)}. "
        what = "folder"
    else:
        link = os.readlink(err.path) if os.path.islink(err.path) else None
        moved, what = move_aside(err.path), "file"
        advice = f"moved to {moved}. "
        if companion and os.path.lexists(companion):  # not an output of the rule: a missing one reruns nothing
            advice = (f"moved to {moved}, and {companion}, the output of its rule beside it, to "
                      f"{move_aside(companion)}, so that Snakemake runs that rule again. ")
            rebuilt = "both"
    advice += (f"Rule {rule} rebuilds {rebuilt}: run the same snakemake command again." if rule
               else "Rerun the step that writes it.")
    if link:  # the rerun would link the same damaged copy again
        advice += f" It was a link to {link} (the between-workflow cache): delete that {what} too."
    return DamagedFileError(err.path, err.reason, advice)


def run_sample(sources: list, heldout_fraction: float, seed: int, max_documents, output) -> None:
    from causalpos.corpus.documents import sample_documents, summarize

    documents = sample_documents(sources, heldout_fraction=heldout_fraction, seed=seed,
                                 max_documents=max_documents)
    write_parquet(documents, output, {"stage": "sample", "sources": sources, "seed": seed,
                                      "heldout_fraction": heldout_fraction, "version": __version__})
    log.info("documents per source and split:\n%s", summarize(documents).to_string(index=False))
    log.info("sample: %d documents -> %s", len(documents), output)


@rebuilds_damaged_inputs
def run_tokenizer(documents_path, name, vocab_size: int, block_len: int, snippet_len: int, n_snippets: int,
                  seed: int, tokenizer_dir, tokens_dir) -> None:
    """Train (name None) or load the tokenizer, save it, and write token blocks and snippets."""
    from causalpos.corpus.tokens import load_tokenizer, train_bpe, write_snippets, write_token_blocks

    documents = read_table(documents_path)
    start = time.perf_counter()
    if name is None:
        tokenizer = train_bpe(documents.loc[documents["split"] == "train", "text"], vocab_size=vocab_size)
        log.info("tokenizer: byte-level BPE, vocab %d, trained in %.1f s", len(tokenizer),
                 time.perf_counter() - start)
    else:
        tokenizer = load_tokenizer(name)
        log.info("tokenizer: %s, vocab %d", name, len(tokenizer))
    tokenizer.save_pretrained(tokenizer_dir)
    info = write_token_blocks(documents, tokenizer, block_len, tokens_dir)
    write_snippets(documents, tokenizer, os.path.join(tokens_dir, "snippets.npy"), snippet_len=snippet_len,
                   n_snippets=n_snippets, seed=seed)
    log.info("tokens: train unigram entropy %.3f nats/token; %s", info["train_unigram_entropy"],
             {k: v["n_blocks"] for k, v in info["splits"].items()})


def checkpoint_folder(root, model: str, settings: dict, blocks_json) -> str:
    """Checkpoints of one training run: keyed by its settings, data and training code, so a
    changed config or code starts afresh while a killed run with the same ones resumes."""
    with open(blocks_json, "rb") as fh:
        key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode() + fh.read()
                             + code_digest("run_train").encode()).hexdigest()[:12]
    return os.path.join(root, model, key)


@rebuilds_damaged_inputs
def run_train(model: str, settings: dict, tokens_dir, tokenizer_dir, out_dir, checkpoint_root,
              processes: int = 1) -> None:
    """Train the `nope` or `rope` decoder; with processes > 1 through torchrun (DDP).

    SIGTERM or SIGINT stops the training after a checkpoint at the step it reached (it raises
    models.train.TrainingInterrupted, or torchrun exits non-zero); the next run resumes from it."""
    import subprocess
    import tempfile

    from causalpos.runtime.processes import one_writer, run_stoppable

    with one_writer(out_dir, f"training {model}"):  # the CLI and the Snakemake job: one writer of a model folder
        checkpoints = checkpoint_folder(checkpoint_root, model, settings, os.path.join(tokens_dir, "blocks.json"))
        log.info("train %s: %s; checkpoints in %s", model, settings, checkpoints)
        if processes == 1:
            from causalpos.models.train import train

            train(model, model == "rope", tokens_dir, out_dir, checkpoints, settings, tokenizer_dir=tokenizer_dir,
                  log=log)
            return
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(settings, fh)
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
                   "-m", "causalpos.models.train", "--model", model, "--blocks", str(tokens_dir), "--out",
                   str(out_dir), "--checkpoints", checkpoints, "--config", fh.name, "--tokenizer", str(tokenizer_dir)]
        log.info("launch: %s", " ".join(command))
        try:
            code = run_stoppable(command)
        finally:
            os.unlink(fh.name)
        if code:
            raise subprocess.CalledProcessError(code, command)


@rebuilds_damaged_inputs
def run_length_eval(model_dir, tokens_dir, factors, max_sequences: int, output, device: str = "auto") -> None:
    from causalpos.models.train import evaluate_lengths

    frame = evaluate_lengths(model_dir, tokens_dir, factors=factors, max_sequences=max_sequences, device=device)
    write_parquet(frame, output, {"stage": "length_eval", "version": __version__})
    log.info("length generalisation:\n%s", frame.to_string(index=False))


@rebuilds_damaged_inputs
def run_length_seeds(runs: list, table, figures, options: dict) -> None:
    """Length generalisation over seeds: `runs` [(model, seed, length_eval.parquet)] to a table and its figure."""
    import pandas as pd

    from causalpos.analysis.lengths import length_seed_frame, paired_differences, with_gaps
    from causalpos.figures.style import save_figure
    from causalpos.figures.training import fig_length_seeds

    per_seed = pd.concat([read_table(path).assign(model=model, seed=int(seed)) for model, seed, path in runs],
                         ignore_index=True)
    frame = length_seed_frame(per_seed)
    write_parquet(frame, table, {"stage": "length_seeds", "runs": [[m, int(s)] for m, s, _ in runs],
                                 "version": __version__})
    gaps = with_gaps(per_seed)
    tables = {"length_seeds": frame, "length_eval": gaps, "length_pairs": paired_differences(gaps)}
    save_figure(lambda: fig_length_seeds(tables, options), options, figures)
    log.info("length over seeds:\n%s", frame.to_string(index=False))


@rebuilds_damaged_inputs
def run_pattern_ablation(name: str, model_dir, tokens_dir, factors, max_sequences: int, n_estimate: int, output,
                         training_seed: int, device: str = "auto", seed: int = 0) -> None:
    """A trained model's held-out loss at every length with its non-relative pattern taken out, and the controls
    (causalpos.models.pattern_ablation), to Parquet."""
    from causalpos.models.intervention import ablate_trained

    start = time.perf_counter()
    dev = resolve_device(device, "training.device")
    frame = ablate_trained(model_dir, tokens_dir, factors, max_sequences, n_estimate, seed, device=dev,
                           model_name=name, training_seed=training_seed)
    write_parquet(frame, output, {"stage": "pattern_ablation", "seed": seed, "training_seed": training_seed,
                                  "device": str(dev), "seconds": time.perf_counter() - start, "version": __version__})
    log.info("pattern ablation in %.1f s:\n%s", time.perf_counter() - start, frame.to_string(index=False))


@rebuilds_damaged_inputs
def run_pattern_ablation_pretrained(name: str, settings: dict, location, documents, n_estimate: int,
                                    n_evaluate: int, output, device: str = "auto", seed: int = 0) -> None:
    """A pretrained LLM's loss at its extraction's length with its non-relative pattern taken out, and the
    controls: the maps from `n_estimate` sequences of its own tokenizer, the losses on `n_evaluate` others."""
    from causalpos.models.intervention import ABLATION_ATTENTION, ablate_pretrained
    from causalpos.models.pretrained import bos_prefix, load_for_extraction
    from causalpos.corpus.sequences import TooFewSequences, llm_sequences, load_tokenizer_for_extraction

    start = time.perf_counter()
    setting = f"extraction.pretrained.models.{name}"
    tokenizer = load_tokenizer_for_extraction(str(location), setting)
    try:
        tokens, _ = llm_sequences(read_table(documents), tokenizer, settings["seq_len"], n_estimate + n_evaluate,
                                  seed=seed, splits=settings["splits"], setting=settings["setting"],
                                  prefix=bos_prefix(tokenizer), strict=True)
    except TooFewSequences as err:
        raise TooFewSequences(f"pattern ablation of {name}: evaluation.ablation_sequences + "
                              f"evaluation.length_sequences = {n_estimate + n_evaluate} sequences wanted; {err}") \
            from None
    dev = resolve_device(device, "extraction.device")
    model, _ = load_for_extraction(str(location), setting, dev, ABLATION_ATTENTION, with_tokenizer=False)
    frame = ablate_pretrained(model, tokens, name, n_estimate, seed, settings["batch_size"], dev)
    write_parquet(frame, output, {"stage": "pattern_ablation_pretrained", "location": str(location),
                                  "settings": settings, "device": str(dev),
                                  "seconds": time.perf_counter() - start, "version": __version__})
    log.info("pattern ablation %s in %.1f s:\n%s", name, time.perf_counter() - start, frame.to_string(index=False))


@rebuilds_damaged_inputs
def run_pattern_ablation_summary(tables: list, table, figures, options: dict) -> None:
    """Every model's ablation table in one (results/summary, or results/seeds/summary over every seed), and
    its figure."""
    from causalpos.figures.ablation import fig_pattern_ablation
    from causalpos.figures.style import save_figure
    from causalpos.models.pattern_ablation import ABLATION_COLUMNS
    from causalpos.catalogue.tables import require_columns

    frame = require_columns(read_tables(tables), ABLATION_COLUMNS, "pattern_ablation")[ABLATION_COLUMNS]
    frame = frame.sort_values(["kind", "model", "seed", "factor"], kind="stable", ignore_index=True)
    write_parquet(frame, table, {"stage": "pattern_ablation_summary", "tables": [str(t) for t in tables],
                                 "version": __version__})
    save_figure(lambda: fig_pattern_ablation({"pattern_ablation": frame}, options), options, figures)
    log.info("pattern ablation: %d rows of %d models -> %s", len(frame), frame["model"].nunique(), table)


def run_pretrained(name: str, spec: dict, out_dir) -> None:
    """Dequantise a GGUF model into a safetensors folder (loaded in a second by the extraction)."""
    from causalpos.models.pretrained import convert_gguf

    convert_gguf(spec, out_dir, f"extraction.pretrained.models.{name}")


@rebuilds_damaged_inputs
def run_extract(name: str, settings: dict, location, outputs: dict, documents=None, snippets=None,
                device: str = "auto", seed: int = 0, state_dir=None) -> None:
    """Scores of every layer, Figure 3's intermediates and the position probe of one model, to Parquet.

    `settings["kind"]` is "trained" (the nope / rope folder, on the evaluation snippets) or
    "pretrained" (a folder or hub id, on documents of `settings["splits"]` in its own tokenizer; the
    sequences are chosen, and too few of them refused, before the model is loaded). With `state_dir` a
    killed run restarts from its last completed group of sequences.
    """
    from causalpos.models.extract import ATTENTION_NAME, extract_to_files
    from causalpos.models.pretrained import bos_prefix, load_for_extraction
    from causalpos.corpus.sequences import llm_sequences, load_tokenizer_for_extraction, sequence_counts

    pretrained = settings["kind"] == "pretrained"  # trained models read token ids: no tokenizer needed
    setting = f"extraction.pretrained.models.{name}" if pretrained else f"model {name}"
    dev = resolve_device(device, "extraction.device")
    meta = {"stage": "extract", "model": name, "location": str(location), "settings": settings, "device": str(dev),
            "version": __version__}
    if not pretrained:
        tokens = read_array(snippets)
    else:
        tokenizer = load_tokenizer_for_extraction(str(location), setting)
        tokens, table = llm_sequences(read_table(documents), tokenizer, settings["seq_len"], settings["n_sequences"],
                                      seed=seed, splits=settings["splits"], setting=settings["setting"],
                                      prefix=bos_prefix(tokenizer), strict=True)
        # which documents the sequences are, and how many of each source and split (docs/models.md)
        meta["sequences"] = {"counts": sequence_counts(table), "doc_ids": table["doc_id"].tolist()}
        log.info("extract %s: sequences by source and split: %s", name, meta["sequences"]["counts"])
    started = time.perf_counter()
    model, _ = load_for_extraction(str(location), setting, dev, ATTENTION_NAME, with_tokenizer=False)
    log.info("extract %s: %s loaded from %s on %s in %.1f s", name, type(model).__name__, location, dev,
             time.perf_counter() - started)
    log.info("extract %s: %d sequences of %d tokens, batch %d", name, *tokens.shape, settings["batch_size"])
    seconds = extract_to_files(model, tokens, name, settings["kind"], outputs, metadata=meta, state_dir=state_dir,
                               code=code_digest("run_extract"),
                               progress=sys.stderr.isatty(), batch_size=settings["batch_size"],
                               intermediates_layer=settings["intermediates_layer"],
                               probe_sequences=settings["probe_sequences"],
                               probe_positions=settings["probe_positions"], seed=seed,
                               n_groups=settings["bootstrap_groups"], per_head=settings.get("per_head", False))
    log.info("extract %s: %.1f s (%.0f tokens/s) -> %s", name, seconds, tokens.size / seconds,
             ", ".join(map(str, outputs.values())))


@rebuilds_damaged_inputs
def run_emergence(name: str, settings: dict, model_dir, snapshots_dir, steps: list, snippets, blocks_dir, metrics,
                  outputs: dict, device: str = "auto", seed: int = 0) -> None:
    """Section 4.2's extraction and the held-out loss at every snapshot of one trained model, to Parquet."""
    from causalpos.models.emergence import emergence_tables
    from causalpos.models.snapshots import snapshot_name

    dev = resolve_device(device, "extraction.device")
    snapshots = {step: os.path.join(snapshots_dir, snapshot_name(step)) for step in steps}
    tables, seconds = emergence_tables(model_dir, snapshots, read_array(snippets), blocks_dir,
                                       read_table(metrics), name, dev, batch_size=settings["batch_size"],
                                       intermediates_layer=settings["intermediates_layer"],
                                       n_groups=settings["bootstrap_groups"], seed=seed)
    meta = {"stage": "emergence", "model": name, "settings": settings, "device": str(dev), "seconds": seconds,
            "version": __version__}
    for table, frame in tables.items():
        write_parquet(frame.assign(table=table), outputs[table], meta)
    log.info("emergence %s: %d snapshots in %.1f s -> %s", name, len(snapshots), seconds,
             ", ".join(map(str, outputs.values())))


@rebuilds_damaged_inputs
def run_emergence_summary(inputs: dict, simulations: list, simulation_groups: list, settings: dict, output) -> None:
    """Claim 7's metrics, the non-relative amplitude and the held-out loss at every snapshot, both models."""
    from causalpos.analysis.emergence import emergence_frame

    start = time.perf_counter()
    tables = {name: read_tables(paths).drop(columns="table", errors="ignore") for name, paths in inputs.items()}
    frame = emergence_frame(tables["scores"], tables["intermediates"], tables["groups"], tables["losses"],
                            read_tables(simulations) if simulations else None, n_bootstrap=settings["n_bootstrap"],
                            seed=settings["seed"],
                            simulation_groups=read_tables(simulation_groups) if simulation_groups else None)
    write_parquet(frame, output, {"stage": "emergence_summary", "settings": settings, "version": __version__})
    log.info("emergence summary: %d rows in %.1f s -> %s", len(frame), time.perf_counter() - start, output)


@rebuilds_damaged_inputs
def run_summary(scores, probes, out_dir) -> None:
    """The measured claims of Sections 4.2 and 5.2, per model and layer, to results/summary/."""
    from causalpos.analysis.summary import write_summaries

    written = write_summaries(PartTable(scores, "scores"), read_tables(probes), out_dir)
    log.info("summary -> %s", ", ".join(map(str, written.values())))


@rebuilds_damaged_inputs
def run_heads(head_scores, output) -> None:
    """Each attention head's non-relative amplitude and first-key emphasis (analysis.heads), every extracted
    model, to results/summary/heads.parquet; read a layer at a time (SmolLM2-135M's table: 8.9M rows)."""
    from causalpos.analysis.heads import KEYS, heads_frame

    start = time.perf_counter()
    table = PartTable(head_scores, "head_scores")
    frame = heads_frame(table.read(dict(zip(KEYS, key))) for key in table.keys(KEYS))
    write_parquet(frame, output, {"stage": "heads", "version": __version__})
    models = frame["model"].nunique()
    log.info("heads: %d rows (%d models) in %.1f s -> %s%s", len(frame), models, time.perf_counter() - start, output,
             "" if models else " (no per-head maps: extraction.per_head is off)")


@rebuilds_damaged_inputs
def run_runtimes(benchmarks: dict, parquets: dict, table, html) -> None:
    """Run times of the expensive jobs (benchmark files and Parquet metadata) to a table and an HTML page."""
    from causalpos.io import atomic_path
    from causalpos.analysis.runtimes import runtime_frame, runtime_html

    frame = runtime_frame(benchmarks, parquets)
    write_parquet(frame, table, {"stage": "runtimes", "version": __version__})
    with atomic_path(html) as tmp:
        tmp.write_text(runtime_html(frame))
    log.info("runtimes: %d jobs, %.0f s in all -> %s, %s", len(frame), frame["seconds"].sum(), table, html)


@rebuilds_damaged_inputs
def run_claims(inputs: dict, settings: dict, table, markdown, folder, options: dict, claim: int | None = None) -> None:
    """The claims ledger from the other stages' Parquet results: a table, its Markdown and its figure's pages.

    `inputs` may hold "convergence" (results/summary/convergence.parquet): a claim whose verdict changes with
    the number of sequences says so in its note. `claim`: only that claim's rows (8 for paper_llms's ledger,
    whose tables are the pretrained models' alone). The figure's pages (catalogue.ledger_pages(claim), in every
    format of options["formats"]) go into `folder`; pages of an earlier run that this one did not write are
    removed."""
    from causalpos.catalogue.claims import ledger_pages
    from causalpos.analysis.claims.convergence import note_flips
    from causalpos.analysis.claims.ledger import build_ledger, ledger_markdown
    from causalpos.figures.ledger import plot_ledger
    from causalpos.catalogue.figures import CLAIMS_FIGURE, CLAIMS_PAGE, claims_pages
    from causalpos.figures.style import save_figure
    from causalpos.io import atomic_path

    start = time.perf_counter()
    # the long tables a layer at a time (issue 26: their memory would grow with the models' depth)
    tables = {name: (PartTable(paths, name) if name in PART_TABLES else read_tables(paths)) if paths else None
              for name, paths in inputs.items()}
    ledger = build_ledger(tables.get("simulations"), tables.get("theory"), tables.get("scores"),
                          tables.get("intermediates"), tables.get("groups"),
                          thresholds=settings.get("thresholds") or None,
                          n_bootstrap=settings["n_bootstrap"], seed=settings["seed"],
                          simulation_groups=tables.get("simulation_groups"), recursion=tables.get("recursion"),
                          window_test=tables.get("window_test"), pattern_ablation=tables.get("pattern_ablation"))
    if claim is not None:
        ledger = ledger[ledger["claim"] == claim].reset_index(drop=True)
    ledger = note_flips(ledger, tables.get("convergence"))
    write_parquet(ledger, table, {"stage": "claims", "settings": settings, "version": __version__})
    with atomic_path(markdown) as tmp:
        tmp.write_text(ledger_markdown(ledger, options.get("model_labels")))
    written = []
    for page, files in claims_pages(folder, ledger_pages(claim), options.get("formats") or ["pdf", "png"]).items():
        save_figure(lambda page=page: plot_ledger(ledger, page, options), options, files,
                    label=f"{CLAIMS_FIGURE} page {page}")
        written += [Path(f) for f in files]
    stale = set(Path(folder).glob(CLAIMS_PAGE.format(claims="*", ext="*"))) - set(written)
    for path in stale:
        path.unlink()
    counts = ledger["verdict"].value_counts().to_dict()
    log.info("claims: %d rows (%s) in %.1f s -> %s, %s, %d page files in %s", len(ledger), counts,
             time.perf_counter() - start, table, markdown, len(written), folder)


@rebuilds_damaged_inputs
def run_window_test(inputs: dict, models: dict, settings: dict, output) -> None:
    """Issue 25's Gemma test (analysis.windows): every pretrained model {name: {"location", "source"}} whose
    config has sliding-window layers, measured before and after its window and predicted by the recursion on
    its stack. `inputs` holds each model's scores and groups tables (paper_llms's where they exist, else the
    default run's: `source` says which)."""
    from transformers import AutoConfig

    from causalpos.analysis.claims.replicates import LedgerInputs, group_sizes, longest_seq_len
    from causalpos.analysis.windows import attention_stack, layer_rows, predicted_scores, window_frame

    start = time.perf_counter()
    rows = []
    for (name, spec), scores_path, groups_path in zip(models.items(), inputs["scores"], inputs["groups"]):
        stack = attention_stack(AutoConfig.from_pretrained(spec["location"]).to_dict())
        if stack is None:
            log.info("window test: %s has no sliding-window layer", name)
            continue
        scores, groups = PartTable(scores_path, "scores"), PartTable(groups_path, "groups").select(quantity="scores")
        data = LedgerInputs(None, None, scores, None, groups, settings["n_bootstrap"], settings["seed"])
        size = longest_seq_len(scores)
        predicted = predicted_scores(stack, max(size, 2 * stack.window))
        common = {"model": name, "source": spec["source"], "seq_len": size,
                  "n_sequences": int(group_sizes(groups).sum())}
        for layer in data.score_layers(name):
            field = data.score_field(name, layer)
            rows += [{**common, **r} for r in layer_rows(field, layer, stack, predicted[layer])]
            del field
        log.info("window test: %s (%s tables, S = %d, window %d, %d layers) in %.0f s", name, spec["source"], size,
                 stack.window, len(stack.windows), time.perf_counter() - start)
    frame = window_frame(rows)
    write_parquet(frame, output, {"stage": "window_test", "models": models, "settings": settings,
                                  "version": __version__})
    log.info("window test: %d rows, %d models in %.1f s -> %s", len(frame), frame["model"].nunique(),
             time.perf_counter() - start, output)


@rebuilds_damaged_inputs
def run_convergence(inputs: dict, settings: dict, table, figures, options: dict) -> None:
    """Claim 8 on the first groups of sequences of every pretrained model: a table and its figure."""
    from causalpos.analysis.claims.convergence import convergence_frame, flip_count
    from causalpos.figures.convergence import plot_convergence
    from causalpos.figures.style import save_figure

    start = time.perf_counter()
    frame = convergence_frame(PartTable(inputs["scores"], "scores"), PartTable(inputs["groups"], "groups"),
                              thresholds=settings.get("thresholds") or None, n_bootstrap=settings["n_bootstrap"],
                              seed=settings["seed"], min_groups=settings["convergence_min_groups"])
    write_parquet(frame, table, {"stage": "convergence", "settings": settings, "version": __version__})
    save_figure(lambda: plot_convergence(frame, options), options, figures)
    log.info("convergence: %d rows at N = %s, %d verdicts change with N, in %.1f s -> %s", len(frame),
             sorted(frame["n_sequences"].unique().tolist()), flip_count(frame), time.perf_counter() - start, table)


def run_config_record(config: dict, output) -> None:
    """The configuration the run used (defaults filled in by validation) as an HTML page for the report."""
    import html

    import yaml

    from causalpos.io import atomic_path

    text = yaml.safe_dump(config, sort_keys=False, default_flow_style=None)
    with atomic_path(output) as tmp:
        tmp.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Configuration</title></head>"
                       f"<body><pre>{html.escape(text)}</pre></body></html>")
    log.info("configuration -> %s", output)


def run_theory(seq_len: int, alphas, output) -> None:
    from causalpos.simulation.theory import theory_frame

    frame = theory_frame(seq_len, alphas)
    write_parquet(frame, output, {"stage": "theory", "version": __version__})
    log.info("theory: %d rows for alphas %s, seq_len %d -> %s", len(frame), list(alphas), seq_len, output)


def run_recursion(variants: dict, output) -> None:
    """The large-d recursion (simulation.recursion) of every variant {name: Variant params}, with its finite-d
    correction where it is cheap, to one table."""
    from causalpos.simulation.recursion import cheap_correction, recursion_table
    from causalpos.simulation.variant import Variant

    start = time.perf_counter()
    built = {name: Variant(**params) for name, params in variants.items()}
    frame = recursion_table(built)
    seconds = time.perf_counter() - start
    write_parquet(frame, output, {"stage": "recursion", "variants": variants, "seconds": seconds,
                                  "device": "cpu", "version": __version__})  # numpy: the run-time table's device
    corrected = [name for name, v in built.items() if cheap_correction(v)]
    log.info("recursion: %d variants (%d with the finite-d correction), %d rows in %.1f s -> %s", len(built),
             len(corrected), len(frame), seconds, output)


def run_simulation(name: str, params: dict, output, groups_output, device: str = "auto", threads: int | None = None,
                   chunk_size: int = 1024) -> None:
    import torch

    from causalpos.simulation.engine import groups_frame, result_frame, simulate
    from causalpos.simulation.variant import Variant
    from causalpos.runtime.devices import usage_since

    variant = Variant(**params)
    if threads:
        torch.set_num_threads(max(1, min(threads, available_cpus())))
    log.info("simulate %s: %s on %s, %d threads", name, variant.params(), device, torch.get_num_threads())
    marks = {}

    def progress(done, total):
        decile = 10 * done // total
        if decile not in marks:
            marks[decile] = True
            log.info("  %3d%%  %d/%d samples", 10 * decile, done, total)

    cpu_start = time.process_time()
    result = simulate(variant, device=device, chunk_size=chunk_size, progress=progress)
    frame = result_frame(result, name)
    metadata = {"stage": "simulate", "variant": name, "params": variant.params(), "sampler": result.sampler,
                "device": result.device, "seconds": result.seconds, **usage_since(cpu_start), "version": __version__}
    write_parquet(groups_frame(result, name), groups_output, metadata)
    write_parquet(frame, output, metadata)
    rate = variant.n_samples / max(result.seconds, 1e-9)
    log.info("simulate %s: %.2f s (%.0f samples/s, %s sampler, %s) -> %s",
             name, result.seconds, rate, result.sampler, result.device, output)


@rebuilds_damaged_inputs
def run_figure(figure: str, inputs: dict, options: dict, outputs) -> None:
    """Draw one figure; `inputs` maps a table name to the Parquet files it is read from."""
    from causalpos.figures.render import render_figure

    start = time.perf_counter()
    tables = {name: read_tables(paths) for name, paths in inputs.items() if paths}
    render_figure(figure, tables, options, list(outputs))
    log.info("figure %s: %.1f s -> %s", figure, time.perf_counter() - start, ", ".join(map(str, outputs)))


def run_all_layers(scores, options: dict, folder) -> None:
    """Figures 11-16 for options["model"]: every page of fig_all_layers, in every format of
    options["formats"], into `folder` (pages of an earlier run that this one did not write are removed)."""
    from causalpos.figures.render import render_all_layers
    from causalpos.catalogue.figures import ALL_LAYERS_PAGE, all_layers_page

    start = time.perf_counter()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    formats = options.get("formats") or ["pdf", "png"]
    written = render_all_layers({"scores": PartTable([scores], "scores")}, options,
                                lambda kind, first, last: [all_layers_page(folder, kind, first, last, fmt)
                                                           for fmt in formats])
    stale = set(folder.glob(ALL_LAYERS_PAGE.format(kind="*", layers="*", ext="*"))) - {Path(p) for p in written}
    for path in stale:
        path.unlink()
    log.info("fig_all_layers %s: %d files in %.1f s -> %s", options.get("model"), len(written),
             time.perf_counter() - start, folder)
