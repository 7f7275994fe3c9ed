"""The output transaction of a command: all outputs renamed in together, or none left behind."""

from __future__ import annotations

import os

import pytest

from optimizer.errors import InputFileError
from optimizer.fileio import (
    OutputTransaction,
    atomic_write_text,
    check_output_path,
    register_output,
    staged_folder,
)


def _names(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_outputs_appear_together_only_when_the_block_succeeds(tmp_path):
    plan, front = tmp_path / "a" / "plan.json", tmp_path / "front.csv"
    with OutputTransaction() as tx:
        tx.add(plan)
        tx.add(front)
        atomic_write_text(plan, "{}")
        atomic_write_text(front, "x,y\n")
        assert not plan.exists() and not front.exists()  # staged as hidden siblings until the end
        assert len([p for p in tmp_path.rglob(".*.tmp")]) == 2
    assert plan.read_text() == "{}" and front.read_text() == "x,y\n"
    assert _names(tmp_path) == ["a", "a/plan.json", "front.csv"]


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_a_failure_removes_every_output_and_the_folders_made_for_them(tmp_path, exc):
    old = tmp_path / "plan.json"
    old.write_text("earlier plan")
    with pytest.raises(type(exc)):
        with OutputTransaction() as tx:
            tx.add(old)
            tx.add(tmp_path / "new" / "deep" / "front.csv")
            atomic_write_text(old, "new plan")
            atomic_write_text(tmp_path / "new" / "deep" / "front.csv", "x\n")
            raise exc
    assert old.read_text() == "earlier plan"
    assert _names(tmp_path) == ["plan.json"]


def test_a_failed_rename_puts_the_earlier_outputs_back(tmp_path):
    first, second = tmp_path / "plan.json", tmp_path / "front.csv"
    first.write_text("earlier plan")
    with pytest.raises(InputFileError, match=r"front\.csv: cannot write the front"):
        with OutputTransaction() as tx:
            tx.add(first, "plan")
            tx.add(second, "front")
            atomic_write_text(first, "new plan")
            atomic_write_text(second, "x\n")
            second.mkdir()  # meanwhile a non-empty folder took the name: the second rename fails
            (second / "keep").write_text("k")
    assert first.read_text() == "earlier plan"
    assert _names(tmp_path) == ["front.csv", "front.csv/keep", "plan.json"]


def test_writability_is_tried_not_guessed(tmp_path):
    if os.geteuid() == 0:
        assert os.access("/proc", os.W_OK)  # what the old check asked, and root is told yes
    with pytest.raises(InputFileError, match=r"^/proc/x\.json: cannot write the output: folder /proc does not "
                                             r"accept new files \(.+\); "):
        check_output_path("/proc/x.json")
    with pytest.raises(InputFileError, match="it is a device or pipe"):
        check_output_path("/dev/null")
    assert check_output_path(tmp_path / "new" / "x.json") == tmp_path / "new" / "x.json"
    assert _names(tmp_path) == []  # the probe file is gone, no folder made


def test_register_output_checks_without_a_transaction(tmp_path):
    with pytest.raises(InputFileError, match="it is a folder"):
        register_output(tmp_path)
    atomic_write_text(tmp_path / "direct.txt", "no transaction: written at once")
    assert (tmp_path / "direct.txt").is_file()


def test_a_replaced_folder_is_swapped_in_whole(tmp_path):
    out = tmp_path / "art"
    with staged_folder(out) as tmp:
        (tmp / "part0.tflite").write_bytes(b"0")
    with pytest.raises(ValueError):
        with staged_folder(out) as tmp:
            (tmp / "part1.tflite").write_bytes(b"1")
            raise ValueError("conversion failed")
    assert _names(tmp_path) == ["art", "art/part0.tflite"]
    with OutputTransaction() as tx:
        tx.add(out, "export folder", "folder")
        atomic_write_text(out / "manifest.json", "{}")  # a file inside a staged folder goes into it
        with staged_folder(out) as tmp:
            (tmp / "part2.tflite").write_bytes(b"2")
        assert sorted(p.name for p in out.iterdir()) == ["part0.tflite"]  # the old export until the end
    assert _names(tmp_path) == ["art", "art/manifest.json", "art/part2.tflite"]


def test_files_written_into_a_kept_folder_are_staged_one_by_one(tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(RuntimeError):
        with OutputTransaction() as tx:
            tx.add(out, "report folder", "files")
            atomic_write_text(out / "report.md", "# r")
            raise RuntimeError
    assert _names(tmp_path) == ["rep", "rep/notes.txt"]
    with OutputTransaction() as tx:
        tx.add(out, "report folder", "files")
        atomic_write_text(out / "report.md", "# r")
    assert _names(tmp_path) == ["rep", "rep/notes.txt", "rep/report.md"]
