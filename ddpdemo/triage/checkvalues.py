"""`ddpdemo.check`'s values: what an expression of the reader's script
is worth on each rank, r = 0..3 (a world of 4). `rank`, `local_rank`,
`RANK`, `args.local_rank`, `int(os.environ["LOCAL_RANK"])`,
`dist.get_rank()` are r; `is_main_process()`, `master_process` are
r == 0; a name set to a constant is that constant (YOLOv7's
`rank = -1`: not distributed); a parameter is what the caller passed.
Anything else is UNK, the same on every rank. Values is the evaluating
half of checkflow.Program; Ctx says where a value is read.
"""
import ast
import operator
import re

from .checkread import (DDP_NAMES, DDPV, MAIN_NAMES, NOTNONE, RANK_CALLS,
                        RANK_NAME, UNK, dotted, last_name)

_INT = re.compile(r"-?\d+")
_CAP = 8                   # most values kept per expression


class Values:
    """The evaluator; checkflow.Program supplies scopes, parents,
    ddp_attrs and _touched."""

    def value(self, node, ctx, depth=0):
        """The values `node` can have on rank ctx.r: a frozenset."""
        got = self._value(node, ctx, depth)
        return got if len(got) <= _CAP else frozenset({UNK})

    def _value(self, node, ctx, depth):
        if depth > 20:
            return frozenset({UNK})
        if isinstance(node, ast.Constant):
            return frozenset({node.value})
        kind = type(node).__name__
        if isinstance(node, ast.UnaryOp):
            kind = type(node.op).__name__
        method = getattr(self, f"_v_{kind}", None)
        return method(node, ctx, depth) if method else frozenset({UNK})

    # One method per kind of expression the check evaluates.

    def _v_List(self, node, ctx, depth):
        elts = []
        for e in node.elts:
            vals = self.value(e, ctx, depth + 1)
            if len(vals) != 1 or UNK in vals:
                return frozenset({UNK})
            elts.extend(vals)
        try:
            return frozenset({tuple(elts)})
        except TypeError:
            return frozenset({UNK})

    _v_Tuple = _v_Set = _v_List

    def _v_Name(self, node, ctx, depth):
        return self._name(node, ctx, depth)

    _v_Attribute = _v_Name

    def _v_Call(self, node, ctx, depth):
        return self._call_value(node, ctx, depth)

    def _v_Subscript(self, node, ctx, depth):
        key = node.slice
        if (dotted(node.value) in ("os.environ", "environ")
                and isinstance(key, ast.Constant)
                and "RANK" in str(key.value).upper()):
            return self._rank(ctx)
        return frozenset({UNK})

    def _v_Compare(self, node, ctx, depth):
        return self._compare(node, ctx, depth)

    def _v_BoolOp(self, node, ctx, depth):
        return self._boolop(node, ctx, depth)

    def _v_Not(self, node, ctx, depth):
        return frozenset(UNK if v in (UNK, NOTNONE) else not v
                         for v in self.value(node.operand, ctx, depth + 1))

    def _v_USub(self, node, ctx, depth):
        return frozenset(-v if isinstance(v, int) else UNK
                         for v in self.value(node.operand, ctx, depth + 1))

    def _v_BinOp(self, node, ctx, depth):
        return self._binop(node, ctx, depth)

    def _v_IfExp(self, node, ctx, depth):
        test = truth(self.value(node.test, ctx, depth + 1))
        out = frozenset()
        if True in test or UNK in test:
            out |= self.value(node.body, ctx, depth + 1)
        if False in test or UNK in test:
            out |= self.value(node.orelse, ctx, depth + 1)
        return out

    def _rank(self, ctx):
        self._touched = True      # this walk read a rank: per rank
        return frozenset({ctx.r})

    def _main(self, ctx):
        self._touched = True
        return frozenset({ctx.r == 0})

    def _name(self, node, ctx, depth):
        key = node.id if isinstance(node, ast.Name) else dotted(node)
        name = last_name(node) or ""
        if isinstance(node, ast.Name) and key in ctx.bound:
            return ctx.bound[key]
        found = self._assigned(key, ctx, depth) if key else None
        if found is not None:
            if RANK_NAME.search(name) and found == {UNK}:
                return self._rank(ctx)
            return found
        if RANK_NAME.search(name):
            return self._rank(ctx)
        if name in MAIN_NAMES:
            return self._main(ctx)
        if (ctx.scope.cls, key) in self.ddp_attrs:
            return frozenset({DDPV})
        return frozenset({UNK})

    def _assigned(self, key, ctx, depth):
        """The values of the assignments of `key` that reach this use, in
        this scope or the ones around it; None if none does."""
        for scope in ctx.chain():
            own = scope is ctx.scope
            defs = scope.reaching(key, ctx.line if own else 10 ** 9,
                                  ctx.where if own else None)
            if defs:
                out = frozenset()
                for line, path, value, ifs in defs:
                    out |= ({UNK} if value is UNK else self.value(
                        value, ctx.at(scope, line, (path, ifs)), depth + 1))
                return out
            if own and key in scope.params:
                return None        # an unbound parameter: by its name
        return None

    def _call_value(self, node, ctx, depth):
        func = node.func
        name = last_name(func)
        if name in RANK_CALLS:
            return self._rank(ctx)
        if name in MAIN_NAMES:
            return self._main(ctx)
        if name in DDP_NAMES:
            return frozenset({DDPV})
        if name in ("int", "str") and node.args:
            vals = self.value(node.args[0], ctx, depth + 1)
            return frozenset(_as_int(v) for v in vals)
        if (name in ("get", "getenv") and node.args
                and isinstance(node.args[0], ast.Constant)
                and "RANK" in str(node.args[0].value).upper()
                and (name == "getenv" or
                     dotted(func.value) in ("os.environ", "environ"))):
            return self._rank(ctx)
        return frozenset({UNK})

    def _compare(self, node, ctx, depth):
        left = self.value(node.left, ctx, depth + 1)
        result = frozenset({True})
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = self.value(comp, ctx, depth + 1)
            step = frozenset(_cmp(op, a, b) for a in left for b in right)
            result = frozenset(_and(a, b) for a in result for b in step)
            left = right
        return result

    def _boolop(self, node, ctx, depth):
        vals = [truth(self.value(v, ctx, depth + 1)) for v in node.values]
        combine = _and if isinstance(node.op, ast.And) else _or
        out = vals[0]
        for v in vals[1:]:
            out = frozenset(combine(a, b) for a in out for b in v)
        return out

    def _binop(self, node, ctx, depth):
        left = self.value(node.left, ctx, depth + 1)
        right = self.value(node.right, ctx, depth + 1)
        out = set()
        for a in left:
            for b in right:
                try:
                    if isinstance(a, int) and isinstance(b, int):
                        out.add(_arith(node.op, a, b))
                    else:
                        out.add(UNK)
                except (ZeroDivisionError, TypeError, ValueError):
                    out.add(UNK)
        return frozenset(out)


class Ctx:
    """Where a value is read: which scope, at which statement, on which
    rank, with which parameter values bound."""

    def __init__(self, program, scope, r, bound, line=0, where=None,
                 guards=()):
        self.program, self.scope, self.r = program, scope, r
        self.bound, self.line, self.where = bound, line, where
        self.guards = guards   # the rank tests taken, (scope id, if)

    def at_stmt(self, stmt):
        return Ctx(self.program, self.scope, self.r, self.bound,
                   stmt.lineno, self.scope.paths.get(id(stmt)), self.guards)

    def guarded(self, guard):
        return Ctx(self.program, self.scope, self.r, self.bound, self.line,
                   self.where, (*self.guards, guard))

    def at(self, scope, line, where=None):
        return Ctx(self.program, scope, self.r,
                   self.bound if scope is self.scope else {}, line, where)

    def chain(self):
        """This scope, then the ones it is nested in, the module last."""
        scope = self.scope
        while scope is not None:
            yield scope
            scope = self.program.parents.get(id(scope.node))

    def value(self, node):
        return self.program.value(node, self)


def truth(values):
    out = set()
    for v in values:
        if v in (UNK, NOTNONE):
            out.add(UNK)
        elif v is DDPV:
            out.add(True)
        else:
            try:
                out.add(bool(v))
            except Exception:
                out.add(UNK)
    return frozenset(out)


def splits(per_rank):
    """Whether a branch's truth, per rank, parts the ranks: it differs
    between ranks, and some rank surely takes it or surely not."""
    seen = list(per_rank.values())
    return (len(set(seen)) > 1
            and any(t in ({True}, {False}) for t in seen))


def _as_int(v):
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            return UNK
    return v


_OPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
        ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge}


def _cmp(op, a, b):
    if isinstance(op, (ast.Is, ast.IsNot)) and None in (a, b):
        other = b if a is None else a
        if other == UNK:
            return UNK
        return (other is None) == isinstance(op, ast.Is)
    if a in (UNK, NOTNONE) or b in (UNK, NOTNONE):
        return UNK
    a, b = _norm(a), _norm(b)
    if isinstance(op, (ast.Is, ast.IsNot)):
        return UNK
    try:
        return _OPS[type(op)](a, b)
    except (TypeError, KeyError):
        return UNK


def _norm(v):
    if isinstance(v, str) and _INT.fullmatch(v):
        return int(v)
    if isinstance(v, tuple):
        return tuple(_norm(x) for x in v)
    return v


def _and(a, b):
    if a is False or b is False:
        return False
    if a is UNK or b is UNK:
        return UNK
    return bool(a) and bool(b)


def _or(a, b):
    if a is True or b is True:
        return True
    if a is UNK or b is UNK:
        return UNK
    return bool(a) or bool(b)


def _arith(op, a, b):
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.Mod):
        return a % b
    if isinstance(op, ast.FloorDiv):
        return a // b
    return UNK
