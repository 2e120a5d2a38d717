"""Large files: no step does whole-file work once per function (issue 12, point 5). The figures
(time and memory linear in the size) are in benchmarks/README.md, from benchmarks/large_file.py."""
from __future__ import annotations

import tvms
from tvms.script import dialect, from_source

FUNCTION = '''    @T.prim_func
    def add_{k}(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] + T.float32({k}.0)
'''


def test_compiling_a_module_scans_its_text_for_the_dialect_once(monkeypatch):
    # each function's default schedule asked for the dialect of its source text, which is the
    # whole file: the file was scanned once per function (quadratic in the file's size)
    text = "@I.ir_module\nclass Module:\n" + "\n".join(FUNCTION.format(k=k) for k in range(4))
    scans = []
    markers = dialect._TVM027_MARKERS

    class Counting:
        def search(self, s):
            scans.append(len(s))
            return markers.search(s)

    monkeypatch.setattr(dialect, "_TVM027_MARKERS", Counting())
    mod = from_source(text)
    lib = tvms.compile(mod, "llvm")
    assert sorted(lib.functions) == [f"add_{k}" for k in range(4)]
    assert scans == [len(text)]
