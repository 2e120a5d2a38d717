"""Comments survive parsing and printing (``tvms fmt``): attached to the statements they belong
to, printed back in place in both dialects, ignored by structural equality."""
from __future__ import annotations

import re

import pytest

from conftest import CORPUS, FIXTURES, corpus_manifest
from tvms.ir import ScriptError
from tvms.cli import main
from tvms.ir import structural_equal, structural_hash
from tvms.script import from_source

GOLDEN = FIXTURES / "comments"
# (file, dialect): each file is the canonical text, comments included, in that dialect
CASES = [("tir_classic.tvms", "classic"), ("tir_tvm-0.27.tvms", "tvm-0.27"),
         ("function_classic.tvms", "classic"), ("function_tvm-0.27.tvms", "tvm-0.27"),
         ("relax.tvms", "classic"), ("relax.tvms", "tvm-0.27")]


def fmt(text: str, dialect: str = "classic") -> str:
    return from_source(text, "t.tvms").script(dialect=dialect) + "\n"


def without_comments(text: str) -> str:
    lines = [line if line.lstrip().startswith("#") else line.split("  #")[0] for line in text.split("\n")
             if not line.lstrip().startswith("#") or "from tvm" in line or '("root")' in line]
    return "\n".join(lines)


@pytest.mark.parametrize("name,dialect", CASES)
def test_golden_files_print_back_byte_for_byte(name: str, dialect: str) -> None:
    text = (GOLDEN / name).read_text()
    assert text.count("# ") >= 5  # (the files do hold comments)
    assert fmt(text, dialect) == text


@pytest.mark.parametrize("name,dialect", CASES)
def test_comments_are_not_semantics(name: str, dialect: str) -> None:
    text = (GOLDEN / name).read_text()
    bare = without_comments(text)
    assert "# a" not in bare and "# end" not in bare
    with_, without = from_source(text), from_source(bare)
    assert structural_equal(with_, without)
    assert structural_hash(with_) == structural_hash(without)
    assert fmt(bare, dialect) == bare + "\n" * (not bare.endswith("\n"))


def test_each_place_a_comment_is_kept() -> None:
    text = (GOLDEN / "tir_classic.tvms").read_text()
    lines = text.split("\n")
    # whole-line comments stay at their place and indentation; trailing ones on their line
    assert lines[3:6] == ["# Comments in every place a TensorIR module has one.", "@I.ir_module",
                          "class Module:  # the class line"]
    for expected in ['            with T.block("C"):  # the block',
                     "                # the block's declarations",  # first in the block
                     "                with T.init():",
                     "                    # the init",
                     "                    C[vi, vj] = T.float32(0.0)  # zero",
                     "                # end of the block's body",
                     "        # end of the function's body",
                     "    # end of the class's body",
                     "# end of the file"]:
        assert expected in lines


# Comments that move: the printer lays out again what they were inside of.
MOVED_IN = '''\
# a header comment the printer writes again:
# from tvm.script import tir as T

@T.prim_func
def main(a: T.handle, n: T.int32):
    T.func_attr({
        # inside a multi-line call
        "tag": "#not a comment",  # trailing, inside
    })
    A = T.match_buffer(a, (4,), "float32")  # the buffer
    for i in range(4):
        for j in range(4):  # inner
            A[i] = (A[i]  # on the first line
                    + T.float32(1))  # on the last line
'''
MOVED_OUT = '''\
# from tvm.script import tir as T

# a header comment the printer writes again:
@T.prim_func
def main(A: T.Buffer((4,), "float32"), n: T.int32):
    # inside a multi-line call
    # trailing, inside
    # the buffer
    T.func_attr({"tag": "#not a comment"})
    for i, j in T.grid(4, 4):
        # inner
        # on the last line
        A[i] = A[i] + T.float32(1.0)  # on the first line
'''


def test_comments_inside_statements_move_before_them() -> None:
    assert fmt(MOVED_IN) == MOVED_OUT
    assert fmt(MOVED_OUT) == MOVED_OUT


@pytest.mark.parametrize("dialect", ["classic", "tvm-0.27"])
@pytest.mark.parametrize("text", [MOVED_IN] + [(GOLDEN / n).read_text() for n, _ in CASES],
                         ids=["moved"] + [f"{n}-{d}" for n, d in CASES])
def test_fmt_is_idempotent(text: str, dialect: str) -> None:
    once = fmt(text, dialect)
    assert fmt(once, dialect) == once


def test_the_header_is_not_duplicated() -> None:
    text = (GOLDEN / "tir_classic.tvms").read_text()
    out = fmt(text, "tvm-0.27")
    assert out.count("import") == 3 and out.count('("root")') == 1
    # (the 0.27 text writes the buffer with offset_factor in the signature, as TVM does, so the
    # handle's own name `a` is not in it: back in classic it is another name, the same program)
    back = fmt(out, "classic")
    assert back.count("import") == 2 and structural_equal(from_source(back), from_source(text))


def test_an_else_starts_a_new_block() -> None:
    text = (GOLDEN / "tir_classic.tvms").read_text()
    assert "            # end of then\n        else:\n            # else\n" in text


def test_fmt_in_place_keeps_comments(tmp_path, capsys) -> None:
    path = tmp_path / "m.tvms"
    path.write_text(MOVED_IN)
    assert main(["fmt", "-i", str(path)]) == 0
    assert path.read_text() == MOVED_OUT
    assert main(["fmt", "--check", str(path)]) == 0


def test_a_schedule_keeps_the_comments_of_the_blocks_it_keeps(tmp_path, capsys) -> None:
    path = tmp_path / "m.tvms"
    path.write_text((GOLDEN / "tir_classic.tvms").read_text())
    assert main(["schedule", "--default", str(path)]) == 0
    out = capsys.readouterr().out
    for kept in ["# the init", "# zero", "# the update", "# before the first function",
                 "# end of the file"]:
        assert kept in out
    assert fmt(out) == out + "\n" * (not out.endswith("\n"))


def test_an_operator_may_start_a_continued_line() -> None:
    # (a line break in brackets, after a comment, does not make "+" a prefix operator)
    text = MOVED_IN.replace("  # on the first line", "")
    assert "A[i] = A[i] + T.float32(1.0)\n" in fmt(text)


LAST_LINES = '''\
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    for i in range(4):
        pass  # nothing here
    for j in range(4):
        with T.block("B"):
            vj = T.axis.spatial(4, j)
            A[vj] = T.float32(0)
            T.reads()  # a late declaration
'''


def test_the_comments_of_a_last_line_that_makes_no_node_are_kept() -> None:
    out = fmt(LAST_LINES)
    assert "        T.evaluate(0)  # nothing here\n" in out
    assert out.endswith("            A[vj] = T.float32(0.0)\n            # a late declaration\n")
    assert fmt(out) == out


SCOPES = '''\
# from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((64,), "float32")):
    # threads
    bx = T.launch_thread("blockIdx.x", 2)  # blocks
    # more threads
    tx = T.launch_thread("threadIdx.x", 32)
    A[bx * 32 + tx] = T.float32(1.0)
    # a buffer
    B = T.decl_buffer((4,))  # B
    # extern
    T.call_extern("int32", "f", B.data)  # the call
'''


def test_statements_that_take_the_rest_of_the_body_keep_their_comments() -> None:
    # (their nodes are built from the call on the right of "=")
    assert fmt(SCOPES) == SCOPES


# ---------------------------------------------------------------- every statement of real files
def commented(text: str) -> tuple[str, int]:
    """The text with a comment line before every statement and a trailing comment after its
    first line (statement lines: those outside brackets), and how many comments it added."""
    out, n, depth = [], 0, 0
    for line in text.split("\n"):
        code = line.strip()
        if code and not code.startswith(("#", "else", "elif")) and depth == 0:
            out.append(f"{line[:len(line) - len(code)]}# c{n}")
            line, n = f"{line}  # c{n + 1}", n + 2
        depth += sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")
        out.append(line)
    return "\n".join(out), n


def check_every_comment_survives(text: str, name: str) -> None:
    try:
        plain = from_source(text, name)
    except ScriptError:
        pytest.skip("the file itself is not read back")
    dialect = "tvm-0.27" if "tirx" in text or "TypeVar" in text else "classic"
    source, count = commented(text)
    mod = from_source(source, name)
    out = mod.script(dialect=dialect)
    found = re.findall(r"# c(\d+)\b", out)
    assert sorted(map(int, found)) == list(range(count))  # each once
    assert from_source(out).script(dialect=dialect) == out
    # (a free variable each reading makes anew, as a copy block's predicate names: mapped)
    assert structural_equal(mod, plain, map_free_vars=True)


FAST = sorted((FIXTURES / "seeds" / "classic").glob("*.tvms")) + sorted((FIXTURES / "seeds_relax").glob("*.tvms"))


@pytest.mark.parametrize("path", FAST, ids=lambda p: p.name)
def test_a_comment_before_and_after_every_statement_survives(path) -> None:
    check_every_comment_survives(path.read_text(), path.name)


ALL = sorted(set(FIXTURES.glob("**/*.tvms")) - set(FAST) - set(GOLDEN.glob("*")))
ALL += [CORPUS / row["file"] for row in corpus_manifest() if row["kind"] != "trace"]


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_a_comment_before_and_after_every_statement_of_every_file_survives(path) -> None:
    check_every_comment_survives(path.read_text(), path.name)


def test_only_the_lines_the_printer_writes_are_dropped() -> None:
    text = SCOPES.replace("    # a buffer\n", "    # from tvm.script import tir as T\n    # from numpy import pi\n")
    out = fmt(text)
    assert out.count("# from tvm.script import tir as T") == 1
    assert "    # from numpy import pi\n    B = T.decl_buffer" in out


def test_a_pass_keeps_the_comments_of_the_bindings_it_rewrites_in_place(tmp_path, capsys) -> None:
    path = tmp_path / "m.tvms"
    path.write_text((GOLDEN / "relax.tvms").read_text())
    assert main(["opt", "-p", "LegalizeOps", str(path)]) == 0
    out = capsys.readouterr().out
    # (choose, first in the file as TVM orders it, is legalized first and takes the name `add`)
    assert "R.call_tir(cls.add1, (x, y), out_sinfo=R.Tensor((2, 3), dtype=\"float32\"))  # the sum\n" in out
    for kept in ["        # the graph\n        with R.dataflow():  # the dataflow block\n",
                 "            # what leaves the block\n", "        return z  # the result\n        # end of main\n",
                 "# end of the file"]:
        assert kept in out


def test_comments_of_a_size_declaration_line_stay_with_the_function() -> None:
    """``m, n = T.int32(), T.int32()`` declares and makes no statement: its comments go first in
    the function's body, as those of ``T.func_attr``, and the text is a fixed point."""
    text = ('# from tvm.script import tir as T\n\n@T.prim_func\n'
            'def main(X: T.Buffer(("m", "n"), "float32"), Y: T.Buffer((m,), "float32")):\n'
            '    # before\n    m, n = T.int32(), T.int32()  # after\n    T.func_attr({"tir.noalias": True})\n'
            '    # store\n    Y[0] = X[0, 0]\n')
    out = fmt(text)
    assert out.split("\n")[4:7] == ["    # before", "    # after", '    T.func_attr({"tir.noalias": True})']
    assert fmt(out) == out


def test_the_comments_of_an_empty_module_are_kept() -> None:
    """A module of no function (``pass``): the comments of its body go below the class."""
    text = "# from tvm.script import ir as I\n\n@I.ir_module\nclass Module:\n    # inside\n    pass  # the pass\n"
    out = fmt(text)
    assert out.endswith("class Module:\n    pass\n# inside\n# the pass\n") and fmt(out) == out


BUILDER_FORMS = '''# from tvm.script import tirx as T

@T.prim_func
def f(A: T.Buffer((8,), "float32"), n: T.int32):
    total = T.local_scalar("float32")
    total = T.float32(0)
    half = T.bind(total * T.float32(0.5))
    T.attr(0, "pragma_a", 1)
    T.attr(0, "pragma_b", "x")
    with T.If(n > 3):
        with T.Then():
            A[0] = half
        with T.Else():
            A[1] = half
'''


def test_the_comments_of_builder_forms_survive() -> None:
    """A scalar's declaration and first store, ``T.bind``, two ``T.attr`` statements (printed as
    one dict where they have no comments) and ``with T.Then()``/``T.Else()`` lines: each of
    their comments is printed once, and the text is a fixed point."""
    check_every_comment_survives(BUILDER_FORMS, "builder_forms.tvms")


def test_a_declaration_line_gives_its_comments_to_the_statement_that_needs_it() -> None:
    """``cse_v1 = T.int32()`` after ``T.func_attr``: the printer writes the declaration as the first
    line of the statement that first needs the variable, so the declaration's comments (its
    trailing one too) go with that statement, and the text is a fixed point."""
    text = ('# from tvm.script import tirx as T\n\n@T.prim_func(private=True)\n'
            'def main(A_ptr: T.handle("float32", "global")):\n'
            '    T.func_attr({"tirx.noalias": True})  # attrs\n    # the size\n    cse_v1 = T.int32()  # trailing\n'
            '    A = T.decl_buffer((cse_v1,), data=A_ptr)\n    A[0] = T.float32(1.0)\n')
    out = fmt(text, "tvm-0.27")
    assert "    # the size\n    cse_v1 = T.int32()  # trailing\n    A = T.decl_buffer" in out and fmt(out, "tvm-0.27") == out
