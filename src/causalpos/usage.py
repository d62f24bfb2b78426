"""What a stage records about its own run beside its seconds: peak memory and CPU time.

A module of its own (not devices) so that an edit here reruns only the stages that record usage.
"""

from __future__ import annotations

import resource
import time


def usage_since(cpu_start: float) -> dict:
    """What a stage records beside its seconds: the job process's peak resident memory (MB, as Snakemake's
    benchmark: max_rss) and its CPU time since time.process_time() was cpu_start (all threads)."""
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: kilobytes
    return {"max_rss_mb": round(peak_kb / 1024, 2), "cpu_seconds": round(time.process_time() - cpu_start, 2)}
