"""Writes respect the file system: devices, FIFOs and /dev/stdout are written through, links are
followed and kept, read-only files are refused, temporary files never outlive a run."""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tvms.cli import main
from tvms.ir.files import TEMP_MARK

UNFORMATTED = '''# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    for i in range(4):
        A[i]   =   T.float32(0)
'''
FORMATTED = UNFORMATTED.replace("A[i]   =   T.float32(0)", "A[i] = T.float32(0.0)")


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "k.tvms"
    path.write_text(UNFORMATTED)
    return path


def test_output_to_dev_null_writes_through_it(source, capsys):
    assert main(["fmt", str(source), "-o", os.devnull]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)  # still the device, not a file renamed over it
    assert capsys.readouterr() == ("", "")


def test_output_to_a_fifo_writes_through_it(source, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    try:
        assert main(["fmt", str(source), "-o", str(fifo)]) == 0
    finally:
        reader.join(timeout=30)
    assert received == [FORMATTED.encode()]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.tvms", "pipe"]


def test_output_to_dev_stdout_appends_to_the_redirected_file(source, tmp_path):
    """``-o /dev/stdout >> log``: the text is appended to the log through the shell's descriptor
    (renaming over the file /dev/stdout leads to would have replaced the log)."""
    log = tmp_path / "log.txt"
    log.write_text("before\n")
    with open(log, "a") as out:
        done = subprocess.run([sys.executable, "-m", "tvms", "fmt", str(source), "-o", "/dev/stdout"],
                              stdout=out, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert log.read_text() == "before\n" + FORMATTED


@pytest.mark.parametrize("flag", ["-i", "-o"])
def test_a_symbolic_link_is_followed_and_kept(source, tmp_path, flag):
    link = tmp_path / "link.tvms"
    link.symlink_to(source.name)
    argv = ["fmt", "-i", str(link)] if flag == "-i" else ["fmt", str(source), "-o", str(link)]
    assert main(argv) == 0
    assert link.is_symlink() and os.readlink(link) == source.name
    assert source.read_text() == FORMATTED


def test_in_place_on_a_read_only_file_refuses(source, capsys):
    source.chmod(0o444)
    assert main(["fmt", "-i", str(source)]) == 2
    assert source.read_text() == UNFORMATTED
    assert stat.S_IMODE(source.stat().st_mode) == 0o444
    assert capsys.readouterr().err == f"tvms: error: cannot write {source}: the file is read-only\n"


def test_in_place_keeps_the_mode(source):
    source.chmod(0o751)
    assert main(["fmt", "-i", str(source)]) == 0
    assert stat.S_IMODE(source.stat().st_mode) == 0o751 and source.read_text() == FORMATTED


def test_temporary_file_is_named_for_tvms_and_removed_on_interrupt(source, tmp_path, monkeypatch):
    seen: list[str] = []
    real_fsync = os.fsync

    def interrupted(fd):
        seen.extend(os.listdir(tmp_path))
        real_fsync(fd)
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    assert main(["fmt", "-i", str(source)]) == 130
    temp = [name for name in seen if name != source.name]
    assert len(temp) == 1 and re.fullmatch(rf"\.k\.tvms{re.escape(TEMP_MARK)}[0-9a-f]{{8}}", temp[0])
    assert os.listdir(tmp_path) == [source.name]
    assert source.read_text() == UNFORMATTED


@pytest.mark.parametrize("command", [
    ["opt", "-p", "LegalizeOps"],
    ["schedule", "--default"],
])
def test_every_command_writes_through_the_same_helper(tmp_path, command):
    from conftest import FIXTURES

    module = FIXTURES / "schedule" / "matmul_00_base.tvms"
    target = tmp_path / "real.tvms"
    target.write_text("old\n")
    target.chmod(0o600)
    link = tmp_path / "link.tvms"
    link.symlink_to(target.name)
    assert main([*command, str(module), "-o", str(link)]) == 0
    assert link.is_symlink() and target.read_text().startswith("# from tvm.script import")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.tvms", "real.tvms"]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    try:
        assert main([*command, str(module), "-o", str(fifo)]) == 0
    finally:
        reader.join(timeout=30)
    assert received == [target.read_bytes()] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_build_writes_through_links_and_refuses_what_it_cannot_write(tmp_path, capsys):
    pytest.importorskip("llvmlite")
    module = tmp_path / "k.tvms"
    module.write_text(FORMATTED)
    target = tmp_path / "lib.so"
    link = tmp_path / "link.so"
    link.symlink_to(target.name)
    assert main(["build", str(module), "-o", str(link)]) == 0
    assert link.is_symlink() and target.read_bytes()[:4] == b"\x7fELF"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.tvms", "lib.so", "link.so"]
    target.chmod(0o444)
    before = target.read_bytes()
    assert main(["build", str(module), "-o", str(target)]) == 2  # a write that cannot happen
    assert target.read_bytes() == before
    assert capsys.readouterr().err == f"tvms: error: cannot write {target}: the file is read-only\n"
    missing = tmp_path / "no" / "lib.so"
    assert main(["build", str(module), "-o", str(missing)]) == 2
    assert f"cannot write {missing}: No such file or directory" in capsys.readouterr().err
    assert main(["build", str(module), "-o", os.devnull]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
