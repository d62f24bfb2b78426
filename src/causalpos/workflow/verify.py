"""What a finished run has lost, for its targets to make again: results that are missing, or not what their job wrote.

Snakemake reruns a job whose output is missing only where something asks for that output: a deleted model, token
file or activation table whose readers are still there leaves "Nothing to be done", and a file damaged in place (a
flipped bit, its mtime kept) looks up to date. The targets (`all`, `length_seeds`, `paper_llms`, `verify`) therefore
also ask for every result above them, by the current rules (Provenance: Snakemake's own matching of outputs), that is
missing or damaged; asking for it makes its job run, and everything made from it follows (its input is updated).

Damage is judged against the record each job leaves beside its outputs (causalpos.checksums): without reading where
size and mtime are the record's, hashing every byte under `full` (target `verify`). A damaged result is moved aside
here (to <name>.damaged), so Snakemake sees it missing: in a dry run too, as a reader that finds damage does.
"""

from __future__ import annotations

import os

from causalpos import checksums
from causalpos.io import move_aside
from causalpos.workflow.job import flat


def lost_results(provenance, targets, full: bool = False, say=print) -> list[str]:
    """The results at or above `targets` that are damaged (moved aside here), or missing while a result made from
    them is still there (a missing file that nothing present rests on is made anyway, if it is needed); each named
    once by `say` with the rule that makes it again, in the order met walking up from the targets."""
    from causalpos.models.model_files import move_folder_aside

    rests: dict[str, bool] = {}  # path: whether a result made from it (by the current rules) is present
    lost = []
    pending = [(os.path.normpath(path), False) for path in flat(targets)]
    while pending:
        path, rested_on = pending.pop()
        if path in rests and (rests[path] or not rested_on):
            continue
        again = path in rests
        rests[path] = rested_on
        job = provenance.writer(path)
        if job is None:  # not a result (an installed corpus, a model the config names): not ours to check
            continue
        rule, wildcards = job
        present = os.path.lexists(path)
        found = checksums.damage(path, full=full) if present and not again else None
        if not present and rested_on:
            lost.append(path)
            say(f"{path} is missing and a result made from it is not: rule {rule} makes it again")
        elif found:
            moved = move_folder_aside(path) if os.path.isdir(path) else move_aside(path)
            checksums.forget(path)
            lost.append(path)
            present = False
            say(f"{path} is damaged: {found}; moved to {moved}; rule {rule} makes it again")
        for item in provenance.inputs(rule, wildcards):
            pending.append((os.path.normpath(str(item)), rested_on or present))
    return sorted(set(lost), key=lost.index)
