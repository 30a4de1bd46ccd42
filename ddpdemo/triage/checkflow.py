"""`ddpdemo.check`'s reading of a script: which ranks take which branch,
and which collectives each rank reaches, through the calls of functions
in the files given, at any depth. Pure `ast`: the reader's code is never
imported or run. The rules (ddpdemo.triage.checkrules) ask it questions;
checkread reads each file, checkvalues evaluates its expressions.

How: every value the check can know is evaluated once per rank
(r = 0..3, a world of 4): `rank`, `local_rank`, `RANK`,
`int(os.environ["LOCAL_RANK"])`, `dist.get_rank()` are r;
`is_main_process()`, `master_process` are r == 0; a name set to a
constant is that constant (YOLOv7's `rank = -1`: not distributed). A
call's arguments are evaluated in the caller and bound to the callee's
parameters, so `create_dataloader(..., rank=-1)` walks the callee with
rank -1 and skips its barrier (YOLOv5's fix, chapter 5). Each function
body then gives, per rank, its signature: the collectives it reaches
in order, loops and unknown branches kept as structure. Ranks whose
signatures differ part; the rank test that splits them is the finding.
What it cannot know (a branch on data) it keeps as structure on every
rank alike, so it never makes two ranks differ.
"""
import ast

from .checkread import (DDP_NAMES, NOTNONE, RANK_NAME, UNK, Scope, dotted,
                        last_name)
from .checkvalues import DDPV, Ctx, Values, truth

_DEPTH = 12                # deepest call chain followed
# Simple statements that end a walk, and how.
_ENDS = {ast.Return: "return", ast.Raise: "return", ast.Break: "break",
         ast.Continue: "continue"}


class Program(Values):
    """Every file given: functions by name, scopes, and the per-rank
    signatures of their bodies (memoised by the values bound)."""

    def __init__(self, modules):
        self.modules = modules
        self.functions = {}      # name -> [(module, def node, class)]
        self.scopes = {}         # id(def node or module) -> Scope
        self.parents = {}        # id(def node) -> enclosing Scope
        self._memo = {}
        self._touched = False
        self._calls = {}
        # (class, `self.model`) set to DDP(...) in a method of that class
        self.ddp_attrs = set()
        # Whether any file wraps a model in DDP: else no call is a DDP
        # forward (a model wrapped in a file not given is not seen).
        self.has_ddp = any(_is_ddp_call(c) for m in modules for c in m.calls)
        for module in modules:
            self.scopes[id(module.tree)] = Scope(module, module.tree)
            self._collect(module, module.tree.body, None,
                          self.scopes[id(module.tree)])

    def _collect(self, module, body, cls, parent):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(
                    (module, node, cls))
                scope = Scope(module, node, cls)
                self.scopes[id(node)] = scope
                self.parents[id(node)] = parent
                self._collect(module, node.body, None, scope)
            elif isinstance(node, ast.ClassDef):
                self._collect(module, node.body, node.name, parent)
            else:
                for field in ("body", "orelse", "finalbody"):
                    self._collect(module, getattr(node, field, ()) or (),
                                  cls, parent)
                for h in getattr(node, "handlers", ()):
                    self._collect(module, h.body, cls, parent)
            if isinstance(node, ast.Assign) and _is_ddp_call(node.value):
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and parent.cls:
                        self.ddp_attrs.add((parent.cls, dotted(t)))

    # -- signatures --------------------------------------------------

    def resolve(self, call, ctx):
        """The function a call runs, when it is one in the files given:
        `f(...)`, `self.f(...)`, `module.f(...)`."""
        func = call.func
        if isinstance(func, ast.Name):
            found = self.functions.get(func.id, ())
            own = [f for f in found if f[0] is ctx.scope.module]
            pick = own or [f for f in found if f[2] is None]
            return pick[0] if pick else None
        if isinstance(func, ast.Attribute):
            found = self.functions.get(func.attr, ())
            base = dotted(func.value)
            if base == "self" and ctx.scope.cls:
                pick = [f for f in found if f[2] == ctx.scope.cls]
                return pick[0] if pick else None
            if base in ctx.scope.module.imports:
                stem = ctx.scope.module.imports[base].split(".")[-1]
                pick = [f for f in found if f[2] is None and
                        _stem(f[0].path) == stem]
                return pick[0] if pick else None
        return None

    def signature(self, fn_node, bound, r, depth=0, stack=()):
        """Per rank r: the collectives `fn_node`'s body reaches, as a
        tuple of ("op", name, chain) / ("loop", sig) / ("alt", a, b)."""
        bound_key = tuple(sorted(bound.items()))
        key, any_rank = (id(fn_node), bound_key, r), (id(fn_node), bound_key)
        for k in (any_rank, key):
            if k in self._memo:
                return self._memo[k]
        if depth > _DEPTH or id(fn_node) in stack:
            return ()
        scope = self.scopes[id(fn_node)]
        ctx = Ctx(self, scope, r, bound)
        outer, self._touched = self._touched, False
        sig, _ = self.walk(scope.body, ctx, depth, (*stack, id(fn_node)))
        # A walk that read no rank is the same on every rank.
        self._memo[key if self._touched else any_rank] = sig
        self._touched = self._touched or outer
        return sig

    def walk(self, stmts, ctx, depth, stack):
        """(signature, how it ended: None, "break", "continue",
        "return")."""
        out = []
        for stmt in stmts:
            ctx = ctx.at_stmt(stmt)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef)):
                continue
            step = getattr(self, f"_w_{type(stmt).__name__}", None)
            if step is None:
                out.extend(self.calls(stmt, ctx, depth, stack))
                end = _ENDS.get(type(stmt))
            else:
                sig, end = step(stmt, ctx, depth, stack)
                out.extend(sig)
            if end:
                return tuple(out), end
        return tuple(out), None

    # One method per compound statement: (signature, how it ended).

    def _w_If(self, stmt, ctx, depth, stack):
        out = self.calls(stmt.test, ctx, depth, stack)
        t = truth(ctx.value(stmt.test))
        if t in ({True}, {False}):
            branch = stmt.body if True in t else stmt.orelse
            inner = ctx.guarded((id(ctx.scope), stmt))
            sig, end = self.walk(branch, inner, depth, stack)
            return [*out, *sig], end
        a, end_a = self.walk(stmt.body, self._entered(stmt, ctx), depth,
                             stack)
        b, end_b = self.walk(stmt.orelse, ctx, depth, stack)
        if a or b:
            out.append(("alt", a, b))
        return out, (end_a if end_a and end_b else None)

    def _entered(self, stmt, ctx):
        """The context inside `if flag or <rank test>:` on a rank whose
        rank test is false: there `flag` holds, on this rank as on the
        ones whose test is true (fairseq's `load_on_all_ranks or rank ==
        0`, whose callee takes a barrier only under `load_on_all_ranks`).
        The flag is bound to True unless the branch assigns it."""
        test = stmt.test
        if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or)):
            return ctx
        open_ = [v for v in test.values
                 if truth(ctx.value(v)) != {False}]
        if len(open_) != 1 or not isinstance(open_[0], ast.Name):
            return ctx
        name = open_[0].id
        if any(isinstance(n, ast.Name) and n.id == name
               and isinstance(n.ctx, ast.Store)
               for s in stmt.body for n in ast.walk(s)):
            return ctx
        return Ctx(self, ctx.scope, ctx.r,
                   {**ctx.bound, name: frozenset({True})}, ctx.line,
                   ctx.where, ctx.guards)

    def _w_For(self, stmt, ctx, depth, stack):
        head = stmt.test if isinstance(stmt, ast.While) else stmt.iter
        out = self.calls(head, ctx, depth, stack)
        body, end = self.walk(stmt.body, ctx, depth, stack)
        if body:
            out.append(("loop", body))
        if end == "return":
            return out, end
        tail, _ = self.walk(stmt.orelse, ctx, depth, stack)
        return [*out, *tail], None

    _w_AsyncFor = _w_While = _w_For

    def _w_With(self, stmt, ctx, depth, stack):
        out = []
        for item in stmt.items:
            out.extend(self.calls(item.context_expr, ctx, depth, stack))
        sig, end = self.walk(stmt.body, ctx, depth, stack)
        return [*out, *sig], end

    _w_AsyncWith = _w_With

    def _w_Try(self, stmt, ctx, depth, stack):
        sig, end = self.walk(stmt.body, ctx, depth, stack)
        out = list(sig)
        for h in stmt.handlers:
            if h.body and isinstance(h.body[-1], ast.Raise):
                continue    # an error path: the rank leaves
            hs, _ = self.walk(h.body, ctx, depth, stack)
            if hs:
                out.append(("alt", hs, ()))
        tail, _ = self.walk(stmt.orelse + stmt.finalbody, ctx, depth, stack)
        return [*out, *tail], end

    _w_TryStar = _w_Try

    def _w_Match(self, stmt, ctx, depth, stack):
        alts = [self.walk(c.body, ctx, depth, stack)[0] for c in stmt.cases]
        return [("alt", *alts)], None

    def calls(self, node, ctx, depth, stack):
        """The collectives of the calls in one statement or expression,
        in source order, with those of the functions they call."""
        out = []
        for call in self.calls_in(node):
            op = ctx.scope.module.is_collective(call)
            here = (ctx.scope.module.path, call.lineno, _fname(ctx.scope))
            if not op and _is_ddp_call(call):
                op = "DDP(model)"
            if not op and self.may_be_model(call.func, ctx) and \
                    DDPV in self.value(call.func, ctx):
                op = "DDP forward"
            if op:
                out.append(("op", op, (here,), ctx.guards))
                continue
            target = self.resolve(call, ctx)
            if target is None:
                continue
            _, fn_node, _ = target
            bound = self.bind(fn_node, call, ctx)
            sig = self.signature(fn_node, bound, ctx.r, depth + 1, stack)
            out.extend(_prefix(sig, here, ctx.guards))
        return out

    def may_be_model(self, func, ctx):
        """Whether a called expression can be a DDP model: a name or an
        attribute of one, not a function of an imported module
        (`torch.zeros`, `os.path.join`)."""
        if not self.has_ddp:
            return False
        base = func
        while isinstance(base, ast.Attribute):
            base = base.value
        return (isinstance(base, ast.Name)
                and base.id not in ctx.scope.module.imports
                and not (isinstance(func, ast.Name)
                         and func.id in self.functions))

    def calls_in(self, node):
        """The calls in a statement or expression, in source order."""
        key = id(node)
        if key not in self._calls:
            calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
            calls.sort(key=lambda c: (c.lineno, c.col_offset))
            self._calls[key] = calls
        return self._calls[key]

    def _argument(self, arg, ctx):
        """An argument's values; one the check cannot know, passed as a
        name, attribute or call, is taken as not None (YOLOv7's
        `test(..., model=ema.ema)`, tested `model is not None`)."""
        values = self.value(arg, ctx)
        if values == {UNK} and isinstance(
                arg, (ast.Name, ast.Attribute, ast.Call)):
            return frozenset({NOTNONE})
        return values

    def bind(self, fn_node, call, ctx):
        """The callee's parameters, each with its values on this rank."""
        scope = self.scopes[id(fn_node)]
        params = list(scope.params)
        if params and params[0] in ("self", "cls"):
            params = params[1:]
        bound = {}
        for p, arg in zip(params, call.args, strict=False):
            if isinstance(arg, ast.Starred):
                break
            bound[p] = self._argument(arg, ctx)
        for kw in call.keywords:
            if kw.arg in scope.params:
                bound[kw.arg] = self._argument(kw.value, ctx)
        for p, d in scope.defaults.items():
            if p not in bound and not RANK_NAME.search(p):
                bound[p] = self.value(d, Ctx(self, scope, ctx.r, {}))
        return bound


def _is_ddp_call(node):
    return isinstance(node, ast.Call) and last_name(node.func) in DDP_NAMES


def _stem(path):
    return path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")


def _fname(scope):
    node = scope.node
    return getattr(node, "name", "<module>")


def _prefix(sig, here, guards):
    """A callee's signature as its caller sees it: each op reached
    through the call at `here`, under the caller's rank tests."""
    out = []
    for item in sig:
        if item[0] == "op":
            out.append(("op", item[1], (here, *item[2]), guards))
        elif item[0] == "loop":
            out.append(("loop", tuple(_prefix(item[1], here, guards))))
        else:
            out.append(("alt", *(tuple(_prefix(s, here, guards))
                                 for s in item[1:])))
    return out


def shape(sig):
    """The signature without where each op was reached: what two ranks'
    signatures must share."""
    out = []
    for item in sig:
        if item[0] == "op":
            out.append(item[1])
        else:
            out.append((item[0], *(shape(s) for s in item[1:])))
    return tuple(out)


def first_difference(a, b):
    """The first op where two ranks' signatures part: (op in a or None,
    op in b or None)."""
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x is not None and y is not None and shape((x,)) == shape((y,)):
            continue
        if (x is not None and y is not None and x[0] == y[0] != "op"
                and len(x) == len(y)):
            for sx, sy in zip(x[1:], y[1:], strict=True):
                if shape(sx) != shape(sy):
                    return first_difference(sx, sy)
        return _first_op(x), _first_op(y)
    return None, None


def _first_op(item):
    if item is None:
        return None
    if item[0] == "op":
        return item
    for sub in item[1:]:
        for inner in sub:
            op = _first_op(inner)
            if op:
                return op
    return None
