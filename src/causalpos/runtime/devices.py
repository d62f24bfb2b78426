"""Which device and how many CPUs a job runs on (one answer for simulation, training and extraction), and what it
records about its own run beside its seconds: peak memory and CPU time."""

from __future__ import annotations

import os
import resource
import time


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask: a SLURM job's allocation, not the node's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def job_cpus() -> int:
    """CPUs this process's job may use: its affinity mask, capped by OMP_NUM_THREADS where that is set.

    Snakemake sets OMP_NUM_THREADS to a job's `threads`: two jobs of one thread each that both took every
    core of a 2-core machine stalled each other for seconds at a time (OpenMP threads spinning)."""
    cpus = available_cpus()
    try:
        return max(1, min(cpus, int(os.environ.get("OMP_NUM_THREADS", cpus))))
    except ValueError:  # not a number: as if unset
        return cpus


def resolve_device(name: str | None, setting: str = "device"):
    """torch.device for "auto" (CUDA if present), "cpu", "cuda" or "cuda:N"; `setting` names the config key
    in the error raised when CUDA is asked for on a machine without it."""
    import torch  # bottom-layer module: keep `import causalpos.runtime.devices` free of torch for the DAG

    if name in (None, "auto"):
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if str(name).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"{setting} = {name} but no CUDA device is available on this machine")
    return torch.device(name)


def usage_since(cpu_start: float) -> dict:
    """What a stage records beside its seconds: the job process's peak resident memory (MB, as Snakemake's
    benchmark: max_rss) and its CPU time since time.process_time() was cpu_start (all threads)."""
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: kilobytes
    return {"max_rss_mb": round(peak_kb / 1024, 2), "cpu_seconds": round(time.process_time() - cpu_start, 2)}
