"""Every output is checked by content against what its job wrote (causalpos.checksums), and a target asks again for
what a finished run has lost (causalpos.workflow.verify): a damaged result, or a missing one that a present result
was made from."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from causalpos import checksums
from causalpos.io import DamagedFileError
from causalpos.workflow.job import check_inputs
from causalpos.workflow.verify import lost_results


def flip_a_bit(path, keep_mtime=True):
    stat = os.stat(path)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.fixture
def written(tmp_path):
    path = tmp_path / "table.bin"
    path.write_bytes(os.urandom(10_000))
    checksums.write_record(path, "maker", ["in.txt"])
    return path


def test_a_record_lies_beside_its_output_and_says_what_wrote_it(written):
    record = json.loads(checksums.record_path(written).read_text())
    assert checksums.record_path(written).name == ".table.bin.sha256"
    assert record["rule"] == "maker" and record["inputs"] == ["in.txt"]
    assert record["files"][""]["sha256"] == checksums.sha256(written)
    assert checksums.damage(written) is None and checksums.damage(written, full=True) is None


def test_a_flipped_bit_with_the_mtime_kept_is_seen_only_by_reading_every_byte(written):
    flip_a_bit(written)
    assert checksums.damage(written) is None  # size and mtime are the record's: not read
    assert "SHA-256 differs" in checksums.damage(written, full=True)


def test_a_flipped_bit_with_a_new_mtime_is_seen_without_full(written):
    flip_a_bit(written, keep_mtime=False)
    os.utime(written, ns=(0, os.stat(written).st_mtime_ns + 10**9))
    assert "SHA-256 differs" in checksums.damage(written)


def test_a_truncation_is_seen_by_its_size(written):
    written.write_bytes(written.read_bytes()[:3000])
    assert checksums.damage(written) == "it has 3,000 bytes where 10,000 were written"


def test_a_touch_is_no_damage_and_is_recorded_so_the_file_is_not_read_again(written):
    os.utime(written, ns=(0, os.stat(written).st_mtime_ns + 10**9))
    assert checksums.damage(written) is None
    assert checksums.read_record(written)["files"][""]["mtime_ns"] == os.stat(written).st_mtime_ns


def test_a_missing_output_and_one_without_a_record(written, tmp_path):
    written.unlink()
    assert checksums.damage(written) == "missing"
    loose = tmp_path / "made_by_hand.txt"
    loose.write_text("x")
    assert checksums.damage(loose, full=True) is None


def test_a_folder_output_records_each_file(tmp_path):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "weights.bin").write_bytes(b"\0" * 100)
    checksums.write_record(folder, "pretrained", [])
    assert set(checksums.read_record(folder)["files"]) == {"config.json", "sub/weights.bin"}
    assert checksums.damage(folder, full=True) is None
    (folder / "sub" / "weights.bin").unlink()
    assert checksums.damage(folder) == "its file sub/weights.bin is missing"


def test_a_reader_refuses_a_damaged_input_naming_it(written):
    check_inputs([str(written)])
    flip_a_bit(written)
    with pytest.raises(DamagedFileError, match="table.bin is damaged .*SHA-256 differs"):
        check_inputs([str(written)])


# ---------------------------------------------------------------- what a target asks for again


class Chain:
    """A DAG of three results, tokens -> model -> figure (the target), each file written by its own rule."""

    def __init__(self, root):
        self.files = {name: str(root / name) for name in ("tokens", "model", "figure")}
        self.made_from = {"tokens": [], "model": ["tokens"], "figure": ["model"]}
        for name in ("tokens", "model", "figure"):
            with open(self.files[name], "wb") as fh:
                fh.write(os.urandom(1000))
            checksums.write_record(self.files[name], name, [self.files[i] for i in self.made_from[name]])

    def writer(self, path):
        for name, file in self.files.items():
            if file == path:
                return name, {}
        return None

    def inputs(self, rule, wildcards):
        return [self.files[name] for name in self.made_from[rule]]

    def lost(self, full=False):
        said = []
        return lost_results(self, [self.files["figure"]], full=full, say=said.append), said


def test_a_finished_run_has_lost_nothing(tmp_path):
    chain = Chain(tmp_path)
    assert chain.lost() == ([], [])
    assert chain.lost(full=True) == ([], [])


def test_a_deleted_intermediate_under_a_present_result_is_asked_for_again(tmp_path):
    chain = Chain(tmp_path)
    os.unlink(chain.files["tokens"])
    lost, said = chain.lost()
    assert lost == [chain.files["tokens"]]
    assert said == [f"{chain.files['tokens']} is missing and a result made from it is not: rule tokens makes it again"]


def test_a_missing_result_that_nothing_present_rests_on_is_left_to_snakemake(tmp_path):
    chain = Chain(tmp_path)
    for name in ("model", "figure"):
        os.unlink(chain.files[name])
    assert chain.lost() == ([], [])  # the figure, a target, is made anyway, and the model with it


def test_a_damaged_result_is_moved_aside_and_asked_for_again(tmp_path):
    chain = Chain(tmp_path)
    flip_a_bit(chain.files["tokens"])
    assert chain.lost() == ([], [])  # size and mtime kept: only `verify` reads it
    lost, said = chain.lost(full=True)
    assert lost == [chain.files["tokens"]]
    assert not os.path.exists(chain.files["tokens"]) and os.path.exists(chain.files["tokens"] + ".damaged")
    assert said[0].startswith(f"{chain.files['tokens']} is damaged: its content is not what rule tokens wrote")
    assert said[0].endswith(f"moved to {chain.files['tokens']}.damaged; rule tokens makes it again")


def test_a_truncated_target_is_moved_aside_without_full(tmp_path):
    chain = Chain(tmp_path)
    with open(chain.files["figure"], "r+b") as fh:
        fh.truncate(10)
    lost, _ = chain.lost()
    assert lost == [chain.files["figure"]] and not os.path.exists(chain.files["figure"])


# ---------------------------------------------------------------- one writer per job's outputs


def test_a_second_job_writing_the_same_outputs_is_refused_at_once_naming_the_first(tmp_path):
    from causalpos.runtime.processes import OutputLocked
    from causalpos.workflow.job import Job, one_job_writing

    scores = str(tmp_path / "activations" / "nope" / "scores.parquet")
    job = Job("extract", output={"scores": scores, "groups": str(tmp_path / "groups.parquet")})
    with one_job_writing(job):
        with pytest.raises(
            OutputLocked, match=f"{scores} is being written by another process \\(a job of rule extract"
        ):
            with one_job_writing(job):
                pass
    with one_job_writing(job):  # released when the first ended
        pass


# ---------------------------------------------------------------- a full disk


def test_a_full_disk_ends_a_job_in_one_line_naming_the_file(capsys):
    import errno

    from causalpos.workflow.user_errors import is_user_error, report_job_error

    full = OSError(errno.ENOSPC, "No space left on device", "results/activations/nope/scores.parquet")
    assert is_user_error(full) and not is_user_error(OSError(errno.EACCES, "Permission denied"))
    report_job_error(full, "results/logs/extract/nope.log")
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("No space left on device writing results/activations/nope/scores.parquet: free space")
    assert line.endswith("(details: results/logs/extract/nope.log)")


# ---------------------------------------------------------------- the results API


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "no-record"])
def test_the_api_names_the_rule_of_a_damaged_table_and_moves_it_aside(tmp_path, recorded):
    import pandas as pd

    from causalpos import results
    from causalpos.catalogue import paths
    from causalpos.catalogue.claims import LEDGER_COLUMNS
    from causalpos.io import write_parquet

    path = tmp_path / paths.table_file("claims", "results")
    path.parent.mkdir(parents=True)
    write_parquet(pd.DataFrame({column: [] for column in LEDGER_COLUMNS}), path)
    if recorded:
        checksums.write_record(path, "claims", [])
    assert list(results.ledger(str(tmp_path / "results")).columns)[: len(LEDGER_COLUMNS)] == LEDGER_COLUMNS
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 3 // 10])  # the probe's ledger cut to 30%
    rule = "rule claims" if recorded else "the rule that writes it"
    with pytest.raises(
        DamagedFileError, match=f"claims.parquet is damaged .*moved to .*damaged; {rule} makes it again"
    ):
        results.ledger(str(tmp_path / "results"))
    assert not path.exists() and Path(f"{path}.damaged").exists()


def test_an_output_linked_from_the_between_workflow_cache_is_not_held_to_an_earlier_jobs_record(written, tmp_path):
    """Snakemake's --cache replaces an output by a link to its copy without running the job, so the record beside it
    is an earlier job's: a link is not checked (else the output would be "damaged", moved aside and fetched again
    on every run)."""
    cached = tmp_path / "cache" / "table.bin"
    cached.parent.mkdir()
    cached.write_bytes(b"another setting's table")
    written.unlink()
    written.symlink_to(cached)
    assert checksums.damage(written) is None and checksums.damage(written, full=True) is None


def test_the_paths_of_a_nest_of_inputs_leave_out_an_input_the_config_left_out(tmp_path):
    from causalpos.workflow.job import flat

    assert flat({"a": str(tmp_path / "a"), "b": None, "c": [tmp_path / "c", [str(tmp_path / "d")]]}.values()) == [
        str(tmp_path / "a"),
        str(tmp_path / "c"),
        str(tmp_path / "d"),
    ]
