"""CommonSubexprElim: an integer expression computed twice or more is bound once, ``cse_v<N>``.

As TVM 0.27's planner does it: every eligible expression (an operation without calls or buffer
loads, not a vector ramp or broadcast, not boolean) is counted where it occurs, with the
innermost scope (loop, branch, attribute body) holding all its occurrences. Occurrences inside a
repeated parent do not count again: a child loses ``(parent count - 1) * multiplicity``. What is
left with two or more occurrences gets a variable, shallower expressions first (then in the order
first met): ``cse_vN = expr`` (the earlier variables put in as ``_Bound`` says) is bound before
its first use in that scope, or before the loop or branch that holds it, and every occurrence
reads the variable.
A binding scopes the statement it is put before and the rest of that statement's sequence; where
that misses a later occurrence (the first one sits inside a buffer declaration or a let, the
others after it), it goes before the enclosing statement instead.

Places are known by the identity of their statement, so a statement object met twice (as
UnrollLoop leaves a body that does not read its loop variable) is copied first.

One difference from TVM 0.27, on purpose: TVM also counts and rewrites the shape of a buffer
where an ``alloc_buffer`` or a declaration makes it (tvms counts a raw ``T.allocate``'s extents,
which are no buffer's shape). Then its SplitHostDevice leaves the host's variable
free in the kernel (DLight's dynamic softmax: ``cse_v1 = T.int64()``, then ``x =
T.decl_buffer((cse_v1,), ...)`` in ``main_kernel``), so tvms leaves shapes as they are.
And two where TVM 0.27 reads a variable out of its binding's scope: it rewrites a loop's step and
a let expression's body without counting them (after ``if n < 5:`` binds ``cse_v1 = n * m + 1``,
``for j in range(0, 8, cse_v1)`` follows the branch). tvms counts a loop's step beside its
bounds, so a step can make a second occurrence, and rewrites only what it counted.
"""
from __future__ import annotations

import dataclasses

from ....ir.expr import (BinaryOp, BufferLoad, Call, Cast, FloatImm, IntImm, Let, Not, PrimExpr, Select, StringImm,
                         Var)
from ....ir.function import PrimFunc
from ....ir.node import Node
from ....ir.stmt import (AllocBuffer, Allocate, AttrStmt, BufferStore, DeclBuffer, Evaluate, For, IfThenElse,
                         LetStmt, SeqStmt, Stmt, While, AssertStmt)
from ....ir.visitor import Mutator, walk
from ...pass_registry import register_pass
from ..tir_pass import checked_prim_func_pass


def _key(e, memo: dict):
    """A structural key of an expression (variables by identity, as TVM's ExprDeepEqual): a number
    per structure, so a key hashes in the time of one node, not of its whole tree. The memo keeps
    each node with its key (a node dropped by a rewrite can't pass its id on) and each structure,
    made of its children's keys, with its number."""
    found = memo.get(id(e))
    if found is not None and found[0] is e:
        return found[1]
    if isinstance(e, Var):
        structure = ("var", id(e))
    elif isinstance(e, Node):
        structure = (type(e).__name__,) + tuple(_key(getattr(e, f.name), memo) for f in dataclasses.fields(e)
                                                if f.name not in ("span",))
    elif isinstance(e, (tuple, list)):
        structure = tuple(_key(x, memo) for x in e)
    else:
        structure = repr(e)
    key = memo.setdefault(structure, len(memo))
    memo[id(e)] = (e, key)
    return key


def _pure(e: PrimExpr) -> bool:
    """Whether ``e`` has no call or buffer load in it (side effects, memory)."""
    return not any(isinstance(n, (Call, BufferLoad)) for n in walk(e))


RECORDED = (BinaryOp, Not, Cast, Select)


class _Entry:
    __slots__ = ("count", "depth", "repr", "lca", "first_scope", "first_stmt", "children", "consumed", "last",
                 "hides", "rank", "var", "value")

    def __init__(self, expr: PrimExpr, scope: int, stmt: Stmt) -> None:
        self.count, self.depth, self.repr, self.consumed = 0, 0, expr, 0
        self.lca = self.first_scope = scope
        self.first_stmt = stmt
        self.children: list = []  # [key, multiplicity]
        self.last = 0  # the number of the last statement it occurs in (statements numbered as visited)
        # whether an operation outside the table (a comparison, a let) lies inside it: the one way
        # an expression can hold another of its own depth or deeper (``T.Select(a < e, b, c)``)
        self.hides = False
        self.rank = 0  # its place in the order bound
        self.var: Var | None = None  # once bound: its variable and the value bound
        self.value: PrimExpr | None = None


class _Planner:
    def __init__(self) -> None:
        self.scopes: list = [(-1, 0, None)]  # (parent, depth, the statement that opened it)
        self.scope = 0
        self.stmt: Stmt | None = None
        self.table: dict = {}
        self.memo: dict = {}
        self.parent: dict = {}  # id(statement) -> the statement holding it
        # id(statement) -> its number in visit order, and one past the last number inside it: what
        # is inside a statement is numbered in [number, end), so "inside" is two comparisons
        self.number: dict = {}
        self.end: dict = {}
        self.binders: dict = {}  # id(variable) -> the statements binding it (loops, lets, launches)
        # (id(statement), id(expression)) of each occurrence counted: the rewriter replaces those
        # alone, since one it never counted (a let's body) may lie outside the binding's scope
        self.counted: set = set()

    def lca(self, a: int, b: int) -> int:
        while self.scopes[a][1] > self.scopes[b][1]:
            a = self.scopes[a][0]
        while self.scopes[b][1] > self.scopes[a][1]:
            b = self.scopes[b][0]
        while a != b:
            a, b = self.scopes[a][0], self.scopes[b][0]
        return a

    def open(self, stmt: Stmt) -> int:
        self.scopes.append((self.scope, self.scopes[self.scope][1] + 1, stmt))
        return len(self.scopes) - 1

    # -- expressions (post-order: children are met first)
    def expr(self, e) -> bool:
        """Records the eligible expressions of ``e``; whether ``e`` is pure (``_pure``), which its
        parent's eligibility takes from its children's, not from a walk of its own."""
        if isinstance(e, Let):
            return self.expr(e.value) and _pure(e.body)  # (nothing inside a let's body is shared out of it)
        if not isinstance(e, PrimExpr):
            return True
        children = _children(e)
        # (a call's arguments count as any operand, as in TVM 0.27, though the call may not evaluate
        # them: ``T.if_then_else(d != 0, n // d + 1, 0)`` twice binds ``n // d + 1`` above it,
        # which divides by zero where ``d == 0``)
        pure = [self.expr(c) for c in children]
        if not isinstance(e, RECORDED):
            return not isinstance(e, (Call, BufferLoad)) and all(pure)
        if all(pure) and not e.dtype.is_bool:  # (eligible)
            self.record(e, children)
        return all(pure)

    def record(self, e: PrimExpr, children: list) -> None:
        key = _key(e, self.memo)
        entry = self.table.get(key)
        if entry is None:
            entry = self.table[key] = _Entry(e, self.scope, self.stmt)
            depth = 0
            for c in children:
                ck = _key(c, self.memo)
                child = self.table.get(ck)
                if child is None:
                    entry.hides |= not isinstance(c, (Var, IntImm, FloatImm, StringImm))
                    continue
                entry.hides |= child.hides
                depth = max(depth, child.depth)
                for pair in entry.children:
                    if pair[0] == ck:
                        pair[1] += 1
                        break
                else:
                    entry.children.append([ck, 1])
            entry.depth = depth + 1
        else:
            entry.lca = self.lca(entry.lca, self.scope)
        entry.count += 1
        self.counted.add((id(self.stmt), id(e)))
        entry.last = self.number[id(self.stmt)]

    # -- statements
    def visit(self, s: Stmt) -> None:
        self.stmt = s
        var = _binding(s)
        if var is not None:
            self.binders.setdefault(id(var), []).append(s)
        self.number[id(s)] = len(self.number)
        children = _sub_statements(s)
        for child in children:
            self.parent[id(child)] = s
        if isinstance(s, SeqStmt):
            for x in children:
                self.visit(x)
        elif isinstance(s, BufferStore):
            self.expr(s.value)
            for i in s.indices:
                self.expr(i)
        elif isinstance(s, Evaluate):
            self.expr(s.value)
        elif isinstance(s, LetStmt):
            self.expr(s.value)
            self.visit(s.body)
        elif isinstance(s, (AllocBuffer, DeclBuffer)):
            self.visit(s.body)  # (its shape stays as it is: see the module's docstring)
        elif isinstance(s, AssertStmt):
            self.expr(s.condition)
            self.visit(s.body)
        elif isinstance(s, Allocate):
            for e in (*s.extents, s.condition):
                self.expr(e)
            self.visit(s.body)
        elif isinstance(s, (For, While, AttrStmt)):
            if isinstance(s, For):
                self.expr(s.min)
                self.expr(s.extent)
                self.expr(s.step)  # (None where it is 1)
            elif isinstance(s, While):
                self.expr(s.condition)
            elif isinstance(s.value, PrimExpr):
                self.expr(s.value)
            outer, self.scope = self.scope, self.open(s)
            self.visit(s.body)
            self.scope = outer
        elif isinstance(s, IfThenElse):
            self.expr(s.condition)
            outer = self.scope
            for branch in (s.then_case, s.else_case):
                if branch is not None:
                    self.scope = self.open(s)
                    self.visit(branch)
            self.scope = outer
        self.end[id(s)] = len(self.number)

    def plan(self) -> tuple[dict, dict]:
        entries = sorted(self.table.items(), key=lambda kv: kv[1].depth)  # (stable: first met first)
        for _, entry in entries:
            if entry.count >= 2:
                for ck, mult in entry.children:
                    self.table[ck].consumed += (entry.count - 1) * mult
        inserts: dict = {}  # id(stmt) -> [(var, value)]
        remap: dict = {}  # key -> var
        for rank, (key, entry) in enumerate(entries):
            if entry.count - entry.consumed < 2:
                continue
            value = Mutator.visit(_Bound(self, entry.depth), entry.repr)  # (all but the root)
            point = self._insertion_point(entry)
            if not self._defined_before(value, point):
                continue  # (two launches of one thread variable: it is bound in each, not above)
            var = Var(f"cse_v{len(remap) + 1}", entry.repr.dtype)
            inserts.setdefault(id(point), []).append((var, value))
            remap[key] = entry.var = var
            entry.rank, entry.value = rank, value
        return inserts, remap

    def _insertion_point(self, entry: _Entry) -> Stmt:
        if entry.first_scope == entry.lca:
            point = entry.first_stmt
        else:
            scope = entry.first_scope
            while self.scopes[scope][0] != entry.lca:
                scope = self.scopes[scope][0]
            point = self.scopes[scope][2]
        while not self._covers(point, entry.last):
            point = self.parent[id(point)]
            if isinstance(point, SeqStmt):  # (its statements are bound one by one, not the whole)
                point = self.parent[id(point)]
        return point

    def _defined_before(self, value: PrimExpr, point: Stmt) -> bool:
        """Whether the variables of ``value`` bound inside the function are bound around ``point``:
        ``point`` is inside one of the statements binding each."""
        needed = {id(v) for v in walk(value) if isinstance(v, Var) and id(v) in self.binders}
        at = self.number[id(point)]
        return all(any(self.number[id(s)] < at < self.end[id(s)] for s in self.binders[v]) for v in needed)

    def _covers(self, point: Stmt, last: int) -> bool:
        """Whether a binding put before ``point`` scopes the occurrences, in the statements numbered
        from the first's up to ``last``: those inside ``point`` or inside a statement after it in
        its sequence. (The first occurrence is inside ``point``, so each is numbered from
        ``point``'s up; the statements of a sequence are numbered one after the other.)"""
        holder = self.parent.get(id(point))
        return last < self.end[id(holder if isinstance(holder, SeqStmt) else point)]


def _binding(s: Stmt) -> Var | None:
    """The variable a statement binds for its body: a loop's, a let's, a thread launch's."""
    if isinstance(s, For):
        return s.loop_var
    if isinstance(s, LetStmt):
        return s.var
    if isinstance(s, AttrStmt) and s.attr_key in ("thread_extent", "virtual_thread"):
        return getattr(s.node, "var", None)
    return None


def _flat(seq: SeqStmt) -> list:
    """The statements of a sequence, those of a sequence inside it spliced in (one scope)."""
    return [x for item in seq.seq for x in (_flat(item) if isinstance(item, SeqStmt) else (item,))]


def _sub_statements(s: Stmt) -> list:
    if isinstance(s, SeqStmt):
        return _flat(s)
    if isinstance(s, IfThenElse):
        return [b for b in (s.then_case, s.else_case) if b is not None]
    body = getattr(s, "body", None)
    return [body] if isinstance(body, Stmt) else []


def _children(e: PrimExpr) -> list:
    if isinstance(e, BinaryOp):
        return [e.a, e.b]
    if isinstance(e, Not):
        return [e.a]
    if isinstance(e, Cast):
        return [e.value]
    if isinstance(e, Select):
        return [e.condition, e.true_value, e.false_value]
    return [c for f in dataclasses.fields(e) for c in _as_list(getattr(e, f.name)) if isinstance(c, PrimExpr)]


def _as_list(value) -> list:
    return list(value) if isinstance(value, tuple) else [value]


class _Bound(Mutator):
    """An expression as TVM 0.27's planner leaves a binding's value. It puts each new variable's
    value, as rewritten so far, into the values of the deeper expressions, rewritten so far too:
    after ``cse_v1 = x + y`` and ``cse_v2 = cse_v1 + 1``, ``(x + y + 1) * 2`` is ``cse_v2 * 2``.
    So an occurrence of an expression bound before, and shallower than ``depth``, reads its
    variable, the outermost first; except where, behind a comparison (``_Entry.hides``), it
    holds an expression of its own depth bound before it: that one went in first (in the deeper
    value, not in the shallower one), and the two no longer match. The walk stops at a
    variable, so the work is the size of the expression, not of the table."""

    def __init__(self, planner: _Planner, depth: int, before: float = float("inf")) -> None:
        self.planner, self.depth, self.before = planner, depth, before  # (before: a rank)

    def visit(self, node):
        if isinstance(node, PrimExpr):
            entry = self.planner.table.get(_key(node, self.planner.memo))
            if (entry is not None and entry.var is not None and entry.depth < self.depth
                    and entry.rank < self.before and (not entry.hides or self._matches(node, entry))):
                return entry.var
        return super().visit(node)

    def visit_Let(self, let: Let) -> Let:
        """Only its value: the planner counts nothing in a let's body, so nothing is put there
        (a variable bound in another branch would be read out of its scope)."""
        value = self.visit(let.value)
        return let if value is let.value else dataclasses.replace(let, value=value)

    def _matches(self, node: PrimExpr, entry: _Entry) -> bool:
        """Whether ``node`` still equals ``entry``'s value when that is put in: rewritten with
        the variables bound before it."""
        inner = Mutator.visit(_Bound(self.planner, self.depth, entry.rank), node)
        return _key(inner, self.planner.memo) == _key(entry.value, self.planner.memo)


class _Distinct(Mutator):
    """The body with each occurrence of a statement its own object (one object met twice, a copy
    the second time): the planner and the rewriter know a place by its statement's identity."""

    def __init__(self) -> None:
        self.seen: set = set()

    def visit(self, node):
        if not isinstance(node, Stmt):
            return node  # (expressions are matched by structure, not identity)
        result = super().visit(node)
        if id(result) in self.seen:
            result = dataclasses.replace(result)
        self.seen.add(id(result))
        return result


class _Rewriter(Mutator):
    """The body with the bindings put in and the occurrences the planner counted reading them."""

    def __init__(self, inserts: dict, remap: dict, planner: _Planner) -> None:
        self.inserts, self.remap, self.memo, self.counted = inserts, remap, planner.memo, planner.counted
        self.stmt: Stmt | None = None  # the statement whose expressions are being rewritten

    def visit(self, node):
        if isinstance(node, PrimExpr) and (id(self.stmt), id(node)) in self.counted:
            var = self.remap.get(_key(node, self.memo))
            if var is not None:
                return var
        if not isinstance(node, Stmt):
            return super().visit(node)
        result = self._rewrite(node)
        if id(node) in self.inserts and not isinstance(node, SeqStmt):
            result = self._bind(node, result)
        return result

    def _rewrite(self, s: Stmt) -> Stmt:
        """``s`` rewritten, without the bindings planned before it."""
        outer, self.stmt = self.stmt, s
        result = Mutator.visit(self, s)
        self.stmt = outer
        return result

    def visit_Buffer(self, buffer):
        return buffer

    def _bind(self, node: Stmt, body: Stmt) -> Stmt:
        for var, value in reversed(self.inserts.pop(id(node))):
            body = LetStmt(var, value, body)
        return body

    def visit_SeqStmt(self, seq: SeqStmt) -> Stmt:
        # a binding before a statement scopes the rest of the sequence
        tail: list = []  # (reversed)
        for item in reversed(_flat(seq)):
            visited = self._rewrite(item)
            if id(item) in self.inserts:
                tail = [self._bind(item, visited if not tail else SeqStmt((visited, *reversed(tail))))]
            else:
                tail.append(visited)
        return tail[0] if len(tail) == 1 else SeqStmt(tuple(reversed(tail)))


def common_subexpr_elim(func: PrimFunc) -> PrimFunc:
    """``func`` with its repeated integer expressions bound once."""
    body = _Distinct().visit(func.body)
    planner = _Planner()
    planner.visit(body)
    inserts, remap = planner.plan()
    if not remap:
        return func
    return func.with_changes(body=_Rewriter(inserts, remap, planner).visit(body))


def CommonSubexprElim():  # noqa: N802 (TVM's name)
    """The pass: ``tvm.tirx.transform.CommonSubexprElim()``."""
    return checked_prim_func_pass(lambda func, mod, ctx: common_subexpr_elim(func), "CommonSubexprElim")


register_pass("CommonSubexprElim", CommonSubexprElim)

__all__ = ["CommonSubexprElim", "common_subexpr_elim"]
