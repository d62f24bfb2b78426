"""A long job says how far it is (issue 42): models.progress's log lines, as a Snakemake log shows them."""

from __future__ import annotations

import logging

from causalpos.models.progress import Progress, Steps


def test_progress_logs_every_five_percent_to_the_end(caplog):
    with caplog.at_level(logging.INFO, logger="causalpos"):
        progress = Progress(1000, 0, "job", terminal=False, unit="tokens")
        for _ in range(100):
            progress.update(10)
        progress.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 20 and lines[0].startswith("job: 50/1000 tokens (5%)")
    assert lines[-1].startswith("job: 1000/1000 tokens (100%)") and "left" not in lines[-1]
    assert all("elapsed" in line for line in lines) and "left" in lines[0]


def test_a_resumed_loop_starts_past_zero_and_an_uneven_last_step_still_ends_the_log(caplog):
    with caplog.at_level(logging.INFO, logger="causalpos"):
        progress = Progress(101, 40, "job", terminal=False, every=0.1)
        for _ in range(61):
            progress.update(1)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("job: 50/101") and lines[-1].startswith("job: 101/101 sequences (100%)")


def test_steps_log_a_line_each(caplog):
    with caplog.at_level(logging.INFO, logger="causalpos"):
        steps = Steps("pretrained", 3)
        for what in ("read", "converted", "saved"):
            steps.done(what)
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(" (")[0] for line in lines] == [
        "pretrained: step 1/3, read",
        "pretrained: step 2/3, converted",
        "pretrained: step 3/3, saved",
    ]
