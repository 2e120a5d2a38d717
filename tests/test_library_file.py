"""A damaged or foreign library file is refused before ``dlopen`` (``runtime/library_file.py``).

Before the trailer, ``load_module`` handed any file to the dynamic loader: a truncated copy of
a library died with SIGBUS inside ``dlopen``, a flipped byte ran whatever it became."""
from __future__ import annotations

import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import tvms  # noqa: E402
from tvms.cli import main  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.runtime.library_file import MAGIC, TRAILER_SIZE, verify_library  # noqa: E402
from tvms.script import from_source  # noqa: E402

SCALE = """# from tvm.script import ir as I
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def scale(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in T.parallel(64):
            B[i] = A[i] * T.float32(3.0)
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lib") / "scale.so"
    tvms.build(from_source(SCALE)).export_library(str(path))
    return path


def _sizes(data: bytes) -> tuple[int, int]:
    """(library_size, metadata_size) from the trailer of ``data``."""
    return struct.unpack_from("<QQ", data, len(data) - TRAILER_SIZE + 16)


def _variant(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _flip(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0x10]) + data[offset + 1:]


def test_the_library_ends_with_metadata_and_a_trailer_that_describe_it(library):
    data = library.read_bytes()
    library_size, metadata_size = _sizes(data)
    assert data[:4] == b"\x7fELF" and data[-TRAILER_SIZE:].startswith(MAGIC)
    assert library_size + metadata_size + TRAILER_SIZE == len(data)
    assert data[library_size:library_size + 1] == b"{"  # the JSON metadata follows the ELF image
    loaded = tvms.runtime.load_module(str(library))
    a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    loaded["scale"](a, b)
    np.testing.assert_array_equal(b, a * 3)


def test_a_truncated_library_is_an_error_in_a_fresh_process_not_a_sigbus(library, tmp_path):
    # before the trailer this child died of SIGBUS inside dlopen (return code -7)
    data = library.read_bytes()
    path = _variant(tmp_path, "cut.so", data[:len(data) // 2])
    script = textwrap.dedent("""
        import sys, tvms
        try:
            tvms.runtime.load_module(sys.argv[1])
        except tvms.TVMSError as err:
            print(err)
    """)
    done = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"load_module: {path} is not a tvms library, or it is truncated "
                           f"(it does not end with the tvms trailer)\n")


def test_truncated_copies_are_refused(library, tmp_path):
    data = library.read_bytes()
    library_size, _ = _sizes(data)
    for cut in (1, 64, 1000, library_size // 2, library_size, len(data) - TRAILER_SIZE, len(data) - 1):
        path = _variant(tmp_path, f"cut{cut}.so", data[:cut])
        expected = ("is not a tvms library (" if cut < TRAILER_SIZE + 4
                    else "is not a tvms library, or it is truncated")
        with pytest.raises(TVMSError, match=r"^load_module: .*cut\d+\.so " + expected.replace("(", r"\(")):
            tvms.runtime.load_module(path)


def test_a_flipped_byte_in_the_code_the_metadata_or_the_trailer_is_named(library, tmp_path):
    data = library.read_bytes()
    library_size, metadata_size = _sizes(data)
    trailer = len(data) - TRAILER_SIZE
    cases = {
        "elf_magic": (1, "the shared object does not start with the ELF magic"),
        "code": (library_size // 2, "the checksum of its code does not match"),
        "metadata": (library_size + metadata_size // 2, "the checksum of its metadata does not match"),
        "magic": (trailer, "is not a tvms library, or it is truncated"),
        "version": (trailer + 8, "has a tvms trailer of version 17 .96 bytes.; this tvms reads version 1"),
        "size": (trailer + 16, "its trailer describes .* bytes, the file has"),
        "code_hash": (trailer + 40, "the checksum of its code does not match"),
        "metadata_hash": (trailer + 90, "the checksum of its metadata does not match"),
    }
    for name, (offset, message) in cases.items():
        path = _variant(tmp_path, f"{name}.so", _flip(data, offset))
        with pytest.raises(TVMSError, match=f"^load_module: {re.escape(path)} (is damaged: )?{message}"):
            tvms.runtime.load_module(path)


def test_every_single_byte_flip_is_detected(library, tmp_path):
    data = bytearray(library.read_bytes())
    path = tmp_path / "flip.so"
    path.write_bytes(data)
    with open(path, "r+b") as f:
        for offset in range(len(data)):
            f.seek(offset)
            f.write(bytes([data[offset] ^ 0x01]))
            f.flush()
            with pytest.raises(TVMSError):
                verify_library(str(path))
            f.seek(offset)
            f.write(bytes([data[offset]]))
    assert verify_library(str(path)) == bytes(data[_sizes(data)[0]:-TRAILER_SIZE])


def test_files_that_are_not_tvms_libraries(tmp_path):
    (tmp_path / "x.c").write_text("int answer(void) { return 42; }\n")
    plain = tmp_path / "plain.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(plain), str(tmp_path / "x.c")], check=True)
    (tmp_path / "dir.so").mkdir()
    cases = {
        str(tmp_path / "missing.so"): "does not exist",
        str(tmp_path / "dir.so"): "is a directory, not a tvms library",
        _variant(tmp_path, "empty.so", b""): "is empty, not a tvms library",
        _variant(tmp_path, "tiny.so", b"hello"): r"is not a tvms library \(5 bytes, shorter than the tvms trailer\)",
        _variant(tmp_path, "text.so", b"not a library\n" * 50): "is not a tvms library, or it is truncated",
        _variant(tmp_path, "garbage.so", np.random.default_rng(1).bytes(5000)):
            "is not a tvms library, or it is truncated",
        str(plain): "is not a tvms library, or it is truncated",
    }
    for path, message in cases.items():
        with pytest.raises(TVMSError, match=f"^load_module: {re.escape(path)} {message}"):
            tvms.runtime.load_module(path)


def test_a_consistent_trailer_over_foreign_metadata_is_refused(library, tmp_path):
    from tvms.runtime.library_file import append_trailer

    data = library.read_bytes()
    image = data[:_sizes(data)[0]]
    for name, metadata, message in (
            ("notjson", b"\xff{", "the metadata of {} is not JSON"),
            ("list", b"[1, 2]", "{} has metadata of format None version None"),
            ("nofunctions", b'{"format": "tvms-library", "version": 3, "target": "llvm"}',
             "the metadata of {} is malformed: KeyError: 'functions'")):
        path = _variant(tmp_path, f"{name}.so", image)
        append_trailer(path, metadata)
        with pytest.raises(TVMSError, match="^load_module: " + message.format(re.escape(path))):
            tvms.runtime.load_module(path)


@pytest.mark.parametrize("variant", ["truncated", "flipped", "empty", "directory"])
def test_tvms_run_of_a_bad_library_exits_2_with_one_line(library, tmp_path, capsys, variant):
    data = library.read_bytes()
    path = tmp_path / "bad.so"
    if variant == "truncated":
        path.write_bytes(data[:5000])
    elif variant == "flipped":
        path.write_bytes(_flip(data, 3000))
    elif variant == "empty":
        path.write_bytes(b"")
    else:
        path.mkdir()
    assert main(["run", str(path), "--random-inputs"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"load_module: {path} " in err and "Traceback" not in err
