"""Generators of deep TVMScript inputs (issue 12, point 5): each returns the text of a module
whose nesting grows with its argument (large files: ``benchmarks/large_file.py``)."""
from __future__ import annotations

HEADER = ("# from tvm.script import ir as I\n# from tvm.script import tir as T\n"
          "# from tvm.script import relax as R\n\n@I.ir_module\nclass Module:\n")


def long_sum_tir(terms: int) -> str:
    """``B[i] = A[i] + A[i] + ...`` with ``terms`` terms: a left-leaning chain of ``+``."""
    total = " + ".join(["A[i]"] * terms)
    return (HEADER + "    @T.prim_func\n"
            "    def main(A: T.Buffer((4,), \"float32\"), B: T.Buffer((4,), \"float32\")):\n"
            "        for i in range(4):\n"
            "            with T.block(\"B\"):\n"
            "                vi = T.axis.spatial(4, i)\n"
            "                T.reads(A[vi])\n"
            "                T.writes(B[vi])\n"
            f"                B[vi] = {total.replace('A[i]', 'A[vi]')}\n")


def nested_loops_tir(depth: int) -> str:
    """``depth`` nested ``for`` loops of extent 1 around one store."""
    lines = [HEADER + "    @T.prim_func\n"
             "    def main(A: T.Buffer((1,), \"float32\"), B: T.Buffer((1,), \"float32\")):\n"]
    indent = "        "
    for k in range(depth):
        lines.append(f"{indent}for i{k} in range(1):\n")
        indent += " "
    lines.append(f"{indent}B[0] = A[0] + T.float32(1.0)\n")
    return "".join(lines)


def _relax_function(body: str) -> str:
    return (HEADER + "    @R.function\n"
            "    def main(x: R.Tensor((4,), dtype=\"float32\")) -> R.Tensor((4,), dtype=\"float32\"):\n"
            f"{body}")


def long_sum_relax(terms: int) -> str:
    """``gv = x + x + ... + x`` with ``terms`` terms, inline in one binding."""
    total = " + ".join(["x"] * terms)
    return _relax_function(f"        gv = {total}\n        return gv\n")


def relax_chain(length: int) -> str:
    """A chain of ``length`` bindings, each adding ``x`` to the one before."""
    body = ["        lv0 = R.add(x, x)\n"]
    body += [f"        lv{k} = R.add(lv{k - 1}, x)\n" for k in range(1, length)]
    body.append(f"        return lv{length - 1}\n")
    return _relax_function("".join(body))


def nested_relax_calls(depth: int) -> str:
    """``R.add(R.add(R.add(x, x), x), x)`` nested ``depth`` deep, written inline."""
    expr = "x"
    for _ in range(depth):
        expr = f"R.add({expr}, x)"
    return _relax_function(f"        gv = {expr}\n        return gv\n")


def nested_tuple_relax(depth: int) -> str:
    """A Relax tuple nested ``depth`` deep: ``((((x,),),),)``, its struct info inferred."""
    expr = "x"
    for _ in range(depth):
        expr = f"({expr},)"
    return (HEADER + "    @R.function\n"
            "    def main(x: R.Tensor((4,), dtype=\"float32\")):\n"
            f"        gv = {expr}\n        return gv\n")


def nested_list_attr(depth: int) -> str:
    """A function attribute whose value is a list nested ``depth`` deep: ``[[[[1]]]]``."""
    value = "1"
    for _ in range(depth):
        value = f"[{value}]"
    return (HEADER + "    @T.prim_func\n"
            "    def main(A: T.Buffer((1,), \"float32\")):\n"
            f"        T.func_attr({{\"deep\": {value}}})\n"
            "        A[0] = T.float32(0.0)\n")
