"""The shape issue 39 gives the rules: they are the DAG, a rule is one job module, variants are wildcards."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]


def bodies() -> dict[str, str]:
    found = {}
    for path in FILES:
        parts = re.split(r"^rule (\w+):", path.read_text(), flags=re.M)
        found |= dict(zip(parts[1::2], parts[2::2]))
    return found


# the target rules: they make nothing of their own, only ask for other rules' outputs (all, verify, ...)
TARGETS = {name for name, body in bodies().items() if not re.search(r"^    output:", body, re.M)}


# 30 when set (1d1116c); 33 with issue 43's rule controls_table and the targets mask_controls (the table and claim
# 12's ledger) and window_control (Gemma's windows lifted), as paper_llms and length_seeds are targets of their own
def test_at_most_33_rules_and_2_use_rule():
    uses = sum(len(re.findall(r"^use rule ", path.read_text(), re.M)) for path in FILES)
    assert len(bodies()) <= 33 and uses <= 2


def test_every_rule_logs_and_runs_its_job_module_with_its_code_digest():
    jobs = {p.stem for p in (ROOT / "src" / "causalpos" / "jobs").glob("*.py")} - {"__init__"}
    for name, body in bodies().items():
        if name in TARGETS:
            continue
        assert re.search(r"^    log:\n", body, re.M), name
        assert '"../workflow_scripts/job.py"' in body, name
        assert f'code=code("{name}")' in body, name
        assert name in jobs, name
        reads = re.search(r"^    input:\n", body, re.M)
        assert bool(reads) == (f'upstream=upstream("{name}")' in body), name  # a rule that reads results


def test_every_rule_takes_its_resources_from_the_one_table():
    for name, body in bodies().items():
        if name in TARGETS:
            continue
        for directive, helper in (("threads:", "job_threads"), ("resources:", "job_resources")):
            match = re.search(rf"^    {directive}(.*)\n((?:        .*\n)*)", body, re.M)
            assert match, (name, directive)
            assert f'{helper}("{name}")' in match.group(1) + match.group(2), (name, directive)


def test_no_params_hide_behind_a_registry():
    """Inputs and params are written in the rule (named input functions of common.smk where the config decides),
    not unpacked from a second description of the DAG."""
    text = "".join(path.read_text() for path in FILES)
    assert "stage_inputs" not in text and "stage_params" not in text and "dag." not in text
