"""Inside trained and pretrained decoders (Sections 4.2 and 5.2): every layer's attention scores,
Figure 3's intermediates and a position probe, over many sequences in constant memory.

The model, loaded with attn_implementation=ATTENTION_NAME, runs batch by batch with
a ScoreRecorder (causalpos.models.recorder): each layer's head-averaged logits of
each sequence go into running float64 sums of the lower triangle. Figure 3's
intermediates (causalpos.models.decoder) add Gram sums of one layer; the position
probe (causalpos.models.probe) keeps sums per hidden state, not rows. The sequences
fall into `n_groups` contiguous groups of whole batches whose sums are written out
as each group completes (groups.parquet, for a bootstrap over sequences), so
memory does not grow with the number of sequences. With a state folder, a killed
run restarts from its last completed group (causalpos.models.resume).

`extract_to_files` writes the five tables (scores, intermediates, probe, groups, head_scores; columns in
causalpos.catalogue.tables; head_scores, each query head's mean scores, has rows only with `per_head`) layer by layer
(causalpos.models.outputs); `extract` returns them as frames, for tests and notebooks.
"""

from __future__ import annotations

import logging
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import torch

from causalpos.models import outputs
from causalpos.models.decoder import intermediates_of_batch, layer_io, layer_modules
from causalpos.models.errors import ExtractionError
from causalpos.models.probe import StreamingProbe
from causalpos.models.progress import Progress
from causalpos.models.recorder import ATTENTION_NAME, ScoreRecorder
from causalpos.models.resume import ExtractionState, run_key
from causalpos.catalogue.tables import ACTIVATION_TABLES, TABLES
from causalpos.tril import packed_pairs
from causalpos.runtime.devices import usage_since

__all__ = [
    "ATTENTION_NAME",
    "Extraction",
    "ExtractionError",
    "ExtractionRun",
    "ExtractionSettings",
    "ScoreRecorder",
    "batch_groups",
    "check_request",
    "extract",
    "extract_to_files",
]

log = logging.getLogger("causalpos")


@dataclass(frozen=True)
class ExtractionSettings:
    """What decides the numbers besides the model and the tokens (the restart state's key includes it)."""

    batch_size: int = 8
    intermediates_layer: int | None = 0  # Figure 3's layer l (and l + 1); None: no intermediates
    probe_sequences: int = 200  # the probe uses the first sequences ...
    probe_positions: int = 32  # ... at most this many positions of each (a seeded choice)
    seed: int = 0
    n_groups: int = 16  # bootstrap groups of whole batches
    per_head: bool = False  # also each query head's mean scores (head_scores.parquet; extraction.per_head)


@dataclass
class Extraction:
    scores: pd.DataFrame
    intermediates: pd.DataFrame
    probe: pd.DataFrame
    seconds: float
    groups: pd.DataFrame | None = None
    head_scores: pd.DataFrame | None = None


def check_request(model, name: str, seq_len: int, intermediates_layer: int | None) -> None:
    n_layers = len(layer_modules(model, name))
    context = getattr(model.config, "max_position_embeddings", None)
    if context is not None and seq_len > context:
        raise ExtractionError(
            f"sequence length {seq_len} exceeds model {name!r}'s context (max_position_embeddings = {context})"
        )
    if intermediates_layer is not None and not 0 <= intermediates_layer < n_layers - 1:
        raise ExtractionError(
            f"extraction.intermediates_layer = {intermediates_layer} is out of range for model "
            f"{name!r}: it needs layer l and l + 1, so 0 <= l <= {n_layers - 2}"
        )


def batch_groups(n_batches: int, n_groups: int) -> np.ndarray:
    """Group of each batch: min(n_groups, n_batches) contiguous runs of batches, sizes within one batch."""
    if n_groups < 1:
        raise ExtractionError(f"extraction.bootstrap_groups must be at least 1, got {n_groups}")
    return np.arange(n_batches) * min(n_groups, n_batches) // max(n_batches, 1)


def choose_probe_positions(n_probe: int, seq_len: int, wanted: int, seed: int) -> np.ndarray:
    """[n_probe, positions]: every position of a short sequence, else a sorted seeded choice per sequence."""
    if seq_len <= wanted:
        return np.tile(np.arange(seq_len), (n_probe, 1))
    rng = np.random.default_rng(seed)
    return np.array(
        [np.sort(rng.choice(seq_len, wanted, replace=False)) for _ in range(n_probe)], dtype=np.int64
    ).reshape(n_probe, wanted)


class ExtractionRun:
    """The sums of one extraction, what one batch adds to them, and what a restart needs of them.

    extract_to_files drives it; `run_batch` alone is one batch's whole step (recorder, intermediates,
    probe rows), what bench/bench_extract.py times against a plain forward."""

    def __init__(self, model, tokens: np.ndarray, name: str, kind: str, settings: ExtractionSettings):
        self.model, self.tokens, self.name, self.kind, self.settings = model, tokens, name, kind, settings
        self.layers = layer_modules(model, name)
        self.device = next(model.parameters()).device
        n_sequences, seq_len = tokens.shape
        self.layer = settings.intermediates_layer
        self.recorder = ScoreRecorder(
            len(self.layers),
            seq_len,
            self.device,
            capture_layers=() if self.layer is None else (self.layer,),
            per_head=settings.per_head,
        )
        self.n_batches = -(-n_sequences // settings.batch_size)
        self.group_of_batch = batch_groups(self.n_batches, settings.n_groups)
        self.n_probe = min(settings.probe_sequences, n_sequences)
        self.positions = choose_probe_positions(self.n_probe, seq_len, settings.probe_positions, settings.seed)
        self.probe = (
            StreamingProbe(len(self.layers) + 1, model.config.hidden_size, self.n_probe, device=self.device)
            if self.n_probe
            else None
        )
        query, key = packed_pairs(seq_len)
        self.packed = torch.from_numpy(query * seq_len + key).to(self.device)  # flat [S, S] index of each packed pair
        self.grams, self.gram_total = {}, {}  # stage -> packed float64 sums: open group, closed groups
        self.next_batch, self.groups_done, self.seconds = 0, 0, 0.0

    # ---------------------------------------------------------------- one batch

    def run_batch(self) -> int:
        """Forward the next batch, add its sums; returns its number of sequences."""
        size = self.settings.batch_size
        start = self.next_batch * size
        ids = torch.from_numpy(self.tokens[start : start + size].astype(np.int64)).to(self.device)
        probed = range(start, min(start + len(ids), self.n_probe))
        probe_index = torch.from_numpy(self.positions[probed.start : probed.stop]).to(self.device) if probed else None
        keep = set() if self.layer is None else {self.layer}
        with layer_io(self.layers, keep, probe_index) as seen:
            self.model.model(input_ids=ids, use_cache=False, causalpos_recorder=self.recorder)  # no LM head
        if self.layer is not None:
            self._add_intermediates(seen)
        if probed:  # the batch's probed sequences at once, on the device
            features = [seen[("probe", state)] for state in range(len(self.layers) + 1)]
            self.probe.add_batch(probed.start, features, self.positions[probed.start : probed.stop])
        self.next_batch += 1
        return len(ids)

    def _add_intermediates(self, seen: dict) -> None:
        layer = self.layer
        grams = intermediates_of_batch(
            self.layers, layer, seen[("in", layer)], self.recorder.outputs.pop(layer), seen[("out", layer)], self.name
        )
        grams["c"] = self.recorder.av_gram.pop(layer)
        for stage, gram in grams.items():  # in place: fresh buffers every batch would fragment the heap
            packed = gram.view(-1)[self.packed]
            if stage in self.grams:
                self.grams[stage] += packed
            else:
                self.grams[stage] = packed

    def group_ends(self) -> bool:
        """Whether the batch just run closes its group."""
        done = self.next_batch
        return done == self.n_batches or self.group_of_batch[done] != self.group_of_batch[done - 1]

    # ---------------------------------------------------------------- groups and the end

    def group_rows(self) -> list:
        """The open group's rows of groups.parquet: (quantity, stage, layer, packed float32 sums)."""
        rows = [("scores", "", layer, self.recorder.group_sums(layer)) for layer in range(len(self.layers))]
        if self.layer is not None:
            stages = {stage: gram.float().cpu().numpy() for stage, gram in self.grams.items()}
            stages["b"], stages["i"] = rows[self.layer][3], rows[self.layer + 1][3]
            rows += [("intermediate", stage, self.layer, stages[stage]) for stage in sorted(stages)]
        return rows

    def close_group(self, part: Path) -> None:
        """Write the open group's rows to `part`, fold its sums into the totals, open the next group."""
        group = int(self.group_of_batch[self.next_batch - 1])
        outputs.write_group_part(
            part, self.group_rows(), self.name, self.kind, group, self.recorder.group_n, self.recorder.seq_len
        )
        for stage, gram in self.grams.items():
            if stage in self.gram_total:
                self.gram_total[stage] += gram
            else:
                self.gram_total[stage] = gram.clone()
            gram.zero_()
        self.recorder.close_group()
        self.groups_done += 1

    def intermediate_means(self, mean: np.ndarray) -> dict:
        """Packed means of the stages: (a), (c)-(h) from their sums; (b) and (i) are the scores' means."""
        if self.layer is None:
            return {}
        n = self.recorder.n_sequences
        matrices = {stage: (total / n).cpu().numpy() for stage, total in self.gram_total.items()}
        matrices["b"], matrices["i"] = mean[self.layer], mean[self.layer + 1]
        return matrices

    # ---------------------------------------------------------------- restart state

    def state(self) -> dict:
        """Everything a restart needs, saved between groups (the open group's sums are then zero)."""
        recorder = self.recorder
        return {
            "next_batch": self.next_batch,
            "groups_done": self.groups_done,
            "seconds": self.seconds,
            "total": recorder.total,
            "running_mean": recorder.running_mean,
            "squared_deviations": recorder.squared_deviations,
            "layer_n": recorder.layer_n,
            "n_sequences": recorder.n_sequences,
            "hidden": recorder.hidden,
            "gram_total": self.gram_total,
            "probe": self.probe,
            "head_total": recorder.head_total,
        }

    def restore(self, state: dict) -> None:
        self.next_batch, self.groups_done, self.seconds = state["next_batch"], state["groups_done"], state["seconds"]
        self.recorder.total.copy_(state["total"])
        self.recorder.running_mean.copy_(state["running_mean"])
        self.recorder.squared_deviations.copy_(state["squared_deviations"])
        self.recorder.layer_n = list(state["layer_n"])
        self.recorder.n_sequences, self.recorder.hidden = state["n_sequences"], state["hidden"]
        self.gram_total, self.probe = state["gram_total"], state["probe"]
        self.recorder.head_total = state.get("head_total")


def _checked_tokens(model, tokens, name: str, settings: ExtractionSettings) -> np.ndarray:
    if model.config._attn_implementation != ATTENTION_NAME:
        raise ExtractionError(
            f"model {name!r} was loaded with attention {model.config._attn_implementation!r}; "
            f"load it with attn_implementation={ATTENTION_NAME!r}"
        )
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or len(tokens) == 0:
        raise ExtractionError(
            f"model {name!r}: tokens must be a non-empty [sequences, positions] array, got shape {tokens.shape}"
        )
    check_request(model, name, tokens.shape[1], settings.intermediates_layer)
    batch_groups(1, settings.n_groups)
    return tokens


@torch.no_grad()
def extract_to_files(
    model,
    tokens: np.ndarray,
    name: str,
    kind: str,
    paths: dict,
    metadata: dict | None = None,
    state_dir=None,
    code: str | None = None,
    progress: bool | None = None,
    **settings,
) -> float:
    """Scores of every layer over all `tokens` [n_sequences, S], the intermediates and the probe on them too,
    written to `paths` {table: file} for the tables of causalpos.catalogue.tables.ACTIVATION_TABLES; returns the seconds.

    `settings` are ExtractionSettings' fields. `metadata` goes into every file, with "seconds" added. With
    `state_dir` a killed run started again with the same model, tokens, settings and `code` (a digest of the
    code that computes the numbers: workflow.digest.code_digest of the runner) resumes from its last completed
    group; without it the group parts go to a temporary folder beside the groups table. `progress`: a tqdm bar
    (True), log lines with the time left (False), or whichever suits stderr (None).
    """
    settings = ExtractionSettings(**settings)
    if settings.per_head and "head_scores" not in paths:
        raise ValueError("extract_to_files: per_head needs a path for the head_scores table")
    tokens = _checked_tokens(model, tokens, name, settings)
    run = ExtractionRun(model, tokens, name, kind, settings)
    if state_dir is None:
        Path(paths["groups"]).parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".extract-", dir=Path(paths["groups"]).parent) as folder:
            return _extract(run, ExtractionState(folder, ""), False, paths, metadata, progress)
    if code is None:
        raise ValueError("extract_to_files: a resumable run (state_dir) needs `code`, the digest of its code")
    key = run_key(model, tokens, {"name": name, "kind": kind, **asdict(settings)}, code)
    return _extract(run, ExtractionState(state_dir, key), True, paths, metadata, progress)


def _extract(
    run: ExtractionRun, state_folder: ExtractionState, resumable: bool, paths: dict, metadata, progress
) -> float:
    state = state_folder.load(run.device) if resumable else None
    if state is not None:
        run.restore(state)
        log.info(
            "extract %s: resuming after %d of %d batches (%d groups done)",
            run.name,
            run.next_batch,
            run.n_batches,
            run.groups_done,
        )
    n_sequences = len(run.tokens)
    bar = Progress(
        n_sequences,
        min(run.next_batch * run.settings.batch_size, n_sequences),
        f"extract {run.name}",
        terminal=progress,
    )
    started, cpu_start = time.perf_counter(), time.process_time()
    while run.next_batch < run.n_batches:
        bar.update(run.run_batch())
        if run.group_ends():
            run.close_group(state_folder.part(run.groups_done))
            if resumable:
                run.seconds += time.perf_counter() - started
                started = time.perf_counter()
                state_folder.save(run.state())
    bar.close()
    run.seconds += time.perf_counter() - started
    # peak memory and CPU time of this process (a resumed run's earlier processes are not counted)
    _write_tables(run, state_folder, paths, {**(metadata or {}), "seconds": run.seconds, **usage_since(cpu_start)})
    if resumable:
        state_folder.remove()
    return run.seconds


def _write_tables(run: ExtractionRun, state_folder: ExtractionState, paths: dict, metadata: dict) -> None:
    """The five tables; head_scores (with per_head the longest by far: 9x the rows of scores for SmolLM2-135M)
    in a second thread while the others are written, as Arrow encodes and writes without holding the GIL."""
    mean, sem = run.recorder.mean_and_sem()
    n, seq_len = run.recorder.n_sequences, run.recorder.seq_len
    with ThreadPoolExecutor(max_workers=1) as pool:
        heads = None
        if "head_scores" in paths:  # no rows without per_head
            heads = pool.submit(
                outputs.write_head_scores,
                paths["head_scores"],
                run.recorder.head_means(),
                run.name,
                run.kind,
                n,
                seq_len,
                metadata,
            )
        outputs.write_scores(paths["scores"], mean, sem, run.name, run.kind, n, metadata)
        outputs.write_intermediates(
            paths["intermediates"], run.intermediate_means(mean), run.layer, run.name, n, metadata
        )
        probe = run.probe.results() if run.probe is not None else []
        outputs.write_probe(paths["probe"], probe, run.name, run.kind, seq_len, metadata)
        outputs.join_group_parts(paths["groups"], [state_folder.part(g) for g in range(run.groups_done)], metadata)
        if heads is not None:
            heads.result()  # its error, if any, raised here


def extract(
    model,
    tokens: np.ndarray,
    name: str,
    kind: str,
    batch_size: int = 8,
    intermediates_layer: int | None = 0,
    probe_sequences: int = 200,
    probe_positions: int = 32,
    seed: int = 0,
    progress: bool | None = False,
    n_groups: int = 16,
    per_head: bool = False,
) -> Extraction:
    """extract_to_files into a temporary folder, the tables read back as frames (without the `table` column)."""
    settings = dict(
        batch_size=batch_size,
        intermediates_layer=intermediates_layer,
        probe_sequences=probe_sequences,
        probe_positions=probe_positions,
        seed=seed,
        n_groups=n_groups,
        per_head=per_head,
    )
    with tempfile.TemporaryDirectory(prefix="causalpos-extract-") as folder:
        paths = {table: Path(folder) / TABLES[table].filename for table in ACTIVATION_TABLES}
        seconds = extract_to_files(model, tokens, name, kind, paths, progress=progress, **settings)
        frames = {table: pq.read_table(path).to_pandas().drop(columns="table") for table, path in paths.items()}
    return Extraction(
        frames["scores"], frames["intermediates"], frames["probe"], seconds, frames["groups"], frames["head_scores"]
    )
