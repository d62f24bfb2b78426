"""Progress of a long loop over sequences: a tqdm bar on a terminal, log lines with the time left otherwise.

A Snakemake log is not a terminal: there a bar would write one line per update, so the
loop logs a line each time another `every` of the work is done (5% by default).
"""

from __future__ import annotations

import logging
import sys
import time

log = logging.getLogger("causalpos")


def duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


class Progress:
    """`done` of `total` units so far (a resumed run starts past zero); the rate counts this run's units only."""

    def __init__(
        self,
        total: int,
        done: int,
        label: str,
        terminal: bool | None = None,
        every: float = 0.05,
        unit: str = "sequences",
    ):
        self.total, self.done, self.label, self.unit = total, done, label, unit
        self.started, self.first = time.perf_counter(), done
        self.step = max(1, int(every * total))
        self.next_line = (done // self.step + 1) * self.step
        self.bar = None
        if sys.stderr.isatty() if terminal is None else terminal:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=done, desc=label, unit=unit[:3])

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.done >= self.next_line or self.done == self.total:
            log.info(self.line())  # the whole line as the record's msg: filters match on its text
            self.next_line = (self.done // self.step + 1) * self.step

    def line(self) -> str:
        elapsed = time.perf_counter() - self.started
        rate = (self.done - self.first) / elapsed if elapsed > 0 else 0.0
        left = (
            f", about {duration((self.total - self.done) / rate)} left" if rate > 0 and self.done < self.total else ""
        )
        return (
            f"{self.label}: {self.done}/{self.total} {self.unit} ({100 * self.done / self.total:.0f}%), "
            f"{duration(elapsed)} elapsed{left}"
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Steps:
    """Progress of work in a few steps that report nothing themselves (a library call that reads a whole
    file): a log line as each step ends, "<label>: step k/n, <what> (<elapsed> elapsed)"."""

    def __init__(self, label: str, total: int):
        self.label, self.total, self.count, self.started = label, total, 0, time.perf_counter()

    def done(self, what: str) -> None:
        self.count += 1
        elapsed = duration(time.perf_counter() - self.started)
        log.info(f"{self.label}: step {self.count}/{self.total}, {what} ({elapsed} elapsed)")
