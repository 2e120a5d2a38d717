"""The ``tvms`` command line tool (tvms.cli): ``tvms fmt`` and ``tvms --version``."""
import io
import os
import stat
import subprocess
import sys

import pytest

import tvms
from tvms.cli import main
from tvms.script import from_source

CANONICAL = '''\
# from tvm.script import ir as I
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i in range(128):
            with T.block("B"):
                vi = T.axis.spatial(128, i)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] + T.float32(1.0)'''

UNFORMATTED = CANONICAL.replace("B[vi] = A[vi]", "B[vi]   =   A[vi]")

BAD = CANONICAL.replace("B[vi] = A[vi]", "B[vi] = = A[vi]")


def test_inputs_are_what_the_tests_assume():
    assert from_source(CANONICAL, "c.tvms").script() == CANONICAL
    assert from_source(UNFORMATTED, "u.tvms").script() == CANONICAL
    assert UNFORMATTED != CANONICAL


def write(tmp_path, name, text, newline=False):
    path = tmp_path / name
    path.write_bytes((text + ("\n" if newline else "")).encode("utf-8"))
    return path


# ----------------------------------------------------------------------------- stdout


def test_fmt_file_to_stdout(tmp_path, capsys):
    path = write(tmp_path, "u.tvms", UNFORMATTED)
    assert main(["fmt", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out == CANONICAL + "\n"
    assert err == ""
    assert path.read_text() == UNFORMATTED  # without -i the file is not touched


def test_fmt_stdin(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(UNFORMATTED))
    assert main(["fmt"]) == 0
    assert capsys.readouterr().out == CANONICAL + "\n"


def test_fmt_stdin_dash(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(UNFORMATTED + "\n"))
    assert main(["fmt", "-"]) == 0
    assert capsys.readouterr().out == CANONICAL + "\n"


def test_fmt_stdin_error_is_named_stdin(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(BAD))
    assert main(["fmt"]) == 2
    assert capsys.readouterr().err.startswith("<stdin>:15:")


def test_fmt_several_files(tmp_path, capsys):
    a = write(tmp_path, "a.tvms", CANONICAL)
    b = write(tmp_path, "b.tvms", UNFORMATTED, newline=True)
    assert main(["fmt", str(a), str(b)]) == 0
    assert capsys.readouterr().out == (CANONICAL + "\n") * 2


# ----------------------------------------------------------------------------- --check / --diff


@pytest.mark.parametrize("newline", [False, True])
def test_check_formatted_file(tmp_path, capsys, newline):
    path = write(tmp_path, "c.tvms", CANONICAL, newline=newline)
    assert main(["fmt", "--check", str(path)]) == 0
    assert capsys.readouterr() == ("", "")


def test_check_unformatted_file(tmp_path, capsys):
    good = write(tmp_path, "c.tvms", CANONICAL)
    bad = write(tmp_path, "u.tvms", UNFORMATTED)
    assert main(["fmt", "--check", str(good), str(bad)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"would reformat {bad}\n"
    assert bad.read_text() == UNFORMATTED


def test_diff(tmp_path, capsys):
    path = write(tmp_path, "u.tvms", UNFORMATTED, newline=True)
    assert main(["fmt", "--diff", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0] == f"--- {path}"
    assert lines[1] == f"+++ {path} (formatted)"
    assert lines[2].startswith("@@ ")
    assert "-                B[vi]   =   A[vi] + T.float32(1.0)" in lines
    assert "+                B[vi] = A[vi] + T.float32(1.0)" in lines
    assert path.read_text() == UNFORMATTED + "\n"


def test_diff_last_line_without_newline(tmp_path, capsys):
    path = write(tmp_path, "u.tvms", UNFORMATTED)
    assert main(["fmt", "--diff", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.endswith(
        "-                B[vi]   =   A[vi] + T.float32(1.0)\n\\ No newline at end of file\n"
        "+                B[vi] = A[vi] + T.float32(1.0)\n\\ No newline at end of file\n"
    )


def test_diff_of_formatted_file_is_empty(tmp_path, capsys):
    path = write(tmp_path, "c.tvms", CANONICAL)
    assert main(["fmt", "--diff", str(path)]) == 0
    assert capsys.readouterr() == ("", "")


def test_diff_with_check(tmp_path, capsys):
    path = write(tmp_path, "u.tvms", UNFORMATTED)
    assert main(["fmt", "--diff", "--check", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith(f"--- {path}\n+++ {path} (formatted)\n")
    assert err == f"would reformat {path}\n"


# ----------------------------------------------------------------------------- -i


@pytest.mark.parametrize("newline", [False, True])
def test_in_place_rewrites_and_keeps_final_newline(tmp_path, capsys, newline):
    path = write(tmp_path, "u.tvms", UNFORMATTED, newline=newline)
    path.chmod(0o640)
    assert main(["fmt", "-i", str(path)]) == 0
    assert capsys.readouterr() == ("", "")
    assert path.read_bytes() == (CANONICAL + ("\n" if newline else "")).encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["u.tvms"]


def test_in_place_leaves_formatted_file_alone(tmp_path):
    path = write(tmp_path, "c.tvms", CANONICAL)
    os.utime(path, (1_000_000, 1_000_000))
    assert main(["fmt", "--in-place", str(path)]) == 0
    assert path.stat().st_mtime == 1_000_000


def test_in_place_syntax_error_leaves_file_untouched(tmp_path, capsys):
    bad = write(tmp_path, "bad.tvms", BAD)
    other = write(tmp_path, "u.tvms", UNFORMATTED)
    before = bad.read_bytes()
    assert main(["fmt", "-i", str(bad), str(other)]) == 2
    assert bad.read_bytes() == before
    assert other.read_text() == CANONICAL  # processing goes on after an error
    assert sorted(os.listdir(tmp_path)) == ["bad.tvms", "u.tvms"]  # no temp file left
    assert f"{bad}:15:25: error:" in capsys.readouterr().err


def test_in_place_write_failure_removes_temp_file(tmp_path, capsys, monkeypatch):
    path = write(tmp_path, "u.tvms", UNFORMATTED)

    def failing_replace(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", failing_replace)
    assert main(["fmt", "-i", str(path)]) == 2
    assert path.read_text() == UNFORMATTED
    assert os.listdir(tmp_path) == ["u.tvms"]
    assert capsys.readouterr().err == f"tvms: error: cannot write {path}: Permission denied\n"


def test_in_place_with_stdin_is_an_error(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(CANONICAL))
    assert main(["fmt", "-i"]) == 2
    assert "standard input" in capsys.readouterr().err


def test_in_place_with_check_is_a_usage_error(tmp_path, capsys):
    path = write(tmp_path, "u.tvms", UNFORMATTED)
    assert main(["fmt", "-i", "--check", str(path)]) == 2
    assert "usage:" in capsys.readouterr().err
    assert path.read_text() == UNFORMATTED


# ----------------------------------------------------------------------------- errors


def test_syntax_error_message(tmp_path, capsys):
    path = write(tmp_path, "bad.tvms", BAD)
    assert main(["fmt", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"{path}:15:25: error: ")
    assert "B[vi] = = A[vi]" in err  # the source line
    assert "^" in err  # the caret line
    assert "Traceback" not in err


def test_missing_file(tmp_path, capsys):
    missing = tmp_path / "missing.tvms"
    good = write(tmp_path, "c.tvms", CANONICAL)
    assert main(["fmt", str(missing), str(good)]) == 2
    out, err = capsys.readouterr()
    assert err == f"tvms: error: cannot read {missing}: No such file or directory\n"
    assert out == CANONICAL + "\n"  # the other file is still formatted


def test_error_wins_over_check(tmp_path, capsys):
    missing = tmp_path / "missing.tvms"
    bad = write(tmp_path, "u.tvms", UNFORMATTED)
    assert main(["fmt", "--check", str(bad), str(missing)]) == 2


def test_not_utf8(tmp_path, capsys):
    path = tmp_path / "latin1.tvms"
    path.write_bytes(CANONICAL.replace("# from", "# caf\xe9 from", 1).encode("latin-1"))
    assert main(["fmt", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tvms: error: cannot read {path}: not valid UTF-8")
    assert "Traceback" not in err


def test_unknown_dialect_is_a_usage_error(tmp_path, capsys):
    path = write(tmp_path, "c.tvms", CANONICAL)
    assert main(["fmt", "--dialect", "nope", str(path)]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_keyboard_interrupt_exits_130(tmp_path, capsys, monkeypatch):
    import tvms.cli

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(tvms.cli, "format_text", interrupted)
    path = write(tmp_path, "c.tvms", CANONICAL)
    assert main(["fmt", str(path)]) == 130
    assert capsys.readouterr().err == ""


def test_a_bug_is_one_line_with_exit_70_and_its_traceback_on_request(tmp_path, monkeypatch, capsys):
    import tvms.cli

    def buggy(*args):
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(tvms.cli, "format_text", buggy)
    path = write(tmp_path, "c.tvms", CANONICAL)
    monkeypatch.delenv("TVMS_TRACEBACK", raising=False)
    assert main(["fmt", str(path)]) == 70
    assert capsys.readouterr().err == (
        "tvms: internal error: ZeroDivisionError: bug (a bug in tvms: please report it with the "
        "command and its input; TVMS_TRACEBACK=1 shows the traceback)\n")
    monkeypatch.setenv("TVMS_TRACEBACK", "1")
    with pytest.raises(ZeroDivisionError):  # bugs are not swallowed for who debugs them
        main(["fmt", str(path)])


# ----------------------------------------------------------------------------- dialects


def test_dialect_conversion(tmp_path, capsys):
    path = write(tmp_path, "c.tvms", CANONICAL)
    assert main(["fmt", "--dialect", "tvm-0.27", str(path)]) == 0
    out = capsys.readouterr().out
    assert 'with T.sblock("B"):' in out
    assert "T.block(" not in out
    assert out == from_source(CANONICAL, "c.tvms").script(dialect="tvm-0.27") + "\n"


def test_default_dialect_is_the_inputs(tmp_path, capsys):
    new = from_source(CANONICAL, "c.tvms").script(dialect="tvm-0.27")
    path = write(tmp_path, "n.tvms", new)
    assert main(["fmt", "--check", str(path)]) == 0
    assert main(["fmt", str(path)]) == 0
    assert capsys.readouterr().out == new + "\n"
    # and back
    assert main(["fmt", "--dialect", "classic", str(path)]) == 0
    assert capsys.readouterr().out == CANONICAL + "\n"


# ----------------------------------------------------------------------------- top level


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"tvms {tvms.__version__}\n"


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


def test_python_m_tvms(tmp_path):
    path = write(tmp_path, "u.tvms", UNFORMATTED)
    proc = subprocess.run(
        [sys.executable, "-m", "tvms", "fmt", str(path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == CANONICAL + "\n"

    bad = write(tmp_path, "bad.tvms", BAD)
    proc = subprocess.run(
        [sys.executable, "-m", "tvms", "fmt", "--check", str(bad)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"{bad}:15:25: error:")
    assert "Traceback" not in proc.stderr


def test_python_m_tvms_stdin_bytes():
    proc = subprocess.run(
        [sys.executable, "-m", "tvms", "fmt", "--dialect", "tvm-0.27"],
        input=UNFORMATTED.encode(), capture_output=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert b'T.sblock("B")' in proc.stdout


def test_fmt_check_finds_the_corpus_and_seed_fixtures_already_formatted(capsys) -> None:
    """Every golden file is canonical in the dialect it is written in (detected, not given)."""
    from conftest import CORPUS, CORPUS_COPY, FIXTURES

    corpus = CORPUS if CORPUS.exists() else CORPUS_COPY  # the whole corpus, or the part copied here
    files = sorted(corpus.glob("*.tvms")) + sorted((FIXTURES / "seeds" / "classic").glob("*.tvms")) \
        + sorted((FIXTURES / "seeds_relax").glob("*.tvms"))
    assert main(["fmt", "--check", *map(str, files)]) == 0, capsys.readouterr().err
