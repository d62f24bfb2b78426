"""One function per workflow stage. The Snakemake scripts and the CLI both call these."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import time

from causalpos import __version__
from causalpos.io import read_tables, write_parquet

log = logging.getLogger("causalpos")

# The modules whose code decides each stage's output: a change to any of them
# reruns the stage (the workflow passes code_digest(stage) as a param).
STAGE_MODULES = {
    "theory": ["causalpos.theory", "causalpos.io", "causalpos.stages"],
    "simulate": ["causalpos.variant", "causalpos.simulate", "causalpos.cpu_kernel", "causalpos.io",
                 "causalpos.stages"],
    "plot": ["causalpos.figures", "causalpos.theory", "causalpos.io", "causalpos.stages"],
}


def code_digest(stage: str) -> str:
    """SHA-256 over the source of the stage's modules (content, not mtime)."""
    digest = hashlib.sha256()
    for module in STAGE_MODULES[stage]:
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            raise ImportError(f"cannot find module {module} of stage {stage}")
        with open(spec.origin, "rb") as fh:
            digest.update(module.encode() + b"\0" + fh.read())
    return digest.hexdigest()[:16]


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_theory(seq_len: int, alphas, output) -> None:
    from causalpos.theory import theory_frame

    frame = theory_frame(seq_len, alphas)
    write_parquet(frame, output, {"stage": "theory", "version": __version__})
    log.info("theory: %d rows for alphas %s, seq_len %d -> %s", len(frame), list(alphas), seq_len, output)


def run_simulation(name: str, params: dict, output, device: str = "auto", threads: int | None = None,
                   chunk_size: int = 1024) -> None:
    import torch

    from causalpos.simulate import Variant, result_frame, simulate

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

    result = simulate(variant, device=device, chunk_size=chunk_size, progress=progress)
    frame = result_frame(result, name)
    write_parquet(frame, output, {
        "stage": "simulate", "variant": name, "params": variant.params(), "sampler": result.sampler,
        "device": result.device, "seconds": result.seconds, "version": __version__,
    })
    rate = variant.n_samples / max(result.seconds, 1e-9)
    log.info("simulate %s: %.2f s (%.0f samples/s, %s sampler, %s) -> %s",
             name, result.seconds, rate, result.sampler, result.device, output)


def run_figure(figure: str, simulation_paths, theory_path, options: dict, outputs) -> None:
    from causalpos.figures import render_figure

    start = time.perf_counter()
    simulation = read_tables(simulation_paths) if simulation_paths else None
    theory = read_tables([theory_path]) if theory_path else None
    render_figure(figure, simulation, theory, options, list(outputs))
    log.info("figure %s: %.1f s -> %s", figure, time.perf_counter() - start, ", ".join(map(str, outputs)))


class log_to_file:
    """Send the stage's log records (and any traceback) to `path`, as Snakemake's log: wants."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self.handler = logging.FileHandler(self.path, mode="w")
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(self.handler)
        log.setLevel(logging.INFO)
        job = os.environ.get("SLURM_JOB_ID")
        if job:
            log.info("SLURM job id %s on %s", job, os.environ.get("SLURMD_NODENAME", "?"))
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None:
            log.error("stage failed", exc_info=(exc_type, exc, tb))
        log.removeHandler(self.handler)
        self.handler.close()
        return False
