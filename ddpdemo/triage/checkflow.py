"""`ddpdemo.check`'s reading of a script: which ranks take which branch,
and which collectives each rank reaches, through the calls of functions
in the files given, at any depth. Pure `ast`: the reader's code is never
imported or run. The rules (ddpdemo.triage.checkrules) ask it questions.

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
import operator
import re

RANKS = (0, 1, 2, 3)
# Simple statements that end a walk, and how.
_ENDS = {ast.Return: "return", ast.Raise: "return", ast.Break: "break",
         ast.Continue: "continue"}
UNK = "<unknown>"          # a value the check cannot know
DDPV = "<ddp model>"       # a DistributedDataParallel object
_INT = re.compile(r"-?\d+")
_CAP = 8                   # most values kept per expression
_DEPTH = 12                # deepest call chain followed

RANK_NAME = re.compile(r"(^|_)((local|global|node|ddp|world)_?)?rank$",
                       re.I)
MAIN_NAMES = {
    "is_main_process", "is_master", "master_process", "is_rank_zero",
    "is_rank0", "rank0", "rank_zero", "is_global_zero", "is_main",
    "is_local_main_process", "main_process", "is_primary",
    "is_master_process", "is_local_master", "is_chief", "is_first_rank"}
RANK_CALLS = {"get_rank", "get_local_rank", "get_global_rank",
              "get_node_local_rank"}
COLLECTIVES = {
    "barrier", "monitored_barrier", "all_reduce", "all_gather",
    "all_gather_into_tensor", "reduce", "broadcast", "reduce_scatter",
    "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather",
    "scatter", "all_gather_object", "broadcast_object_list",
    "gather_object", "scatter_object_list", "new_group"}
# Collectives of libraries that wrap torch.distributed (accelerate).
WRAPPED = {"wait_for_everyone"}
DDP_NAMES = {"DistributedDataParallel", "DDP"}


def dotted(node):
    """`torch.distributed.barrier` for that expression, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def last_name(node):
    """The name an expression ends in: `args.local_rank` -> local_rank."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return last_name(node.func)
    return None


class Module:
    """One file: its tree, functions by name, and what it imports."""

    def __init__(self, path, tree, lines):
        self.path, self.tree, self.lines = path, tree, lines
        self.dist = {"dist", "torch.distributed"}   # names of the module
        self.from_dist = set()     # `from torch.distributed import x`
        self.imports = {}          # local name -> module name
        self.calls = []
        stack = [tree]
        while stack:               # one walk: imports and calls
            node = stack.pop()
            stack.extend(ast.iter_child_nodes(node))
            if isinstance(node, ast.Call):
                self.calls.append(node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._imported(node)
        self.calls.sort(key=lambda c: (c.lineno, c.col_offset))

    def _imported(self, node):
        """Note the names an import binds, torch.distributed's above all."""
        mod = getattr(node, "module", None) or ""
        for a in node.names:
            name = a.asname or a.name
            if isinstance(node, ast.Import):
                if a.name == "torch.distributed" and a.asname:
                    self.dist.add(a.asname)
                self.imports[name] = a.name
                continue
            if mod == "torch" and a.name == "distributed":
                self.dist.add(name)
            elif mod.startswith("torch.distributed"):
                self.from_dist.add(name)
            self.imports[name] = f"{mod}.{a.name}"

    def is_collective(self, call):
        """The op's name when `call` is a torch.distributed collective."""
        func = call.func
        if isinstance(func, ast.Attribute):
            base = dotted(func.value)
            if func.attr in COLLECTIVES and base in self.dist:
                return func.attr
            if func.attr in WRAPPED:
                return func.attr
        elif (isinstance(func, ast.Name) and func.id in COLLECTIVES
              and func.id in self.from_dist):
            return func.id
        return None


class Scope:
    """A function (or a module's top level): its assignments, each with
    the line and the statement lists that enclose it, for a small
    reaching-definitions question (which assignments can a use see)."""

    def __init__(self, module, node, cls=None):
        self.module, self.node, self.cls = module, node, cls
        self.defs = {}       # name -> [(line, path, value node or UNK)]
        self.ifs = {}        # assignment statement -> enclosing ifs
        self.params = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            self.params = [p.arg for p in a.posonlyargs + a.args]
            self.defaults = dict(zip(self.params[::-1], a.defaults[::-1],
                                     strict=False))
            for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
                self.params.append(p.arg)
                if d is not None:
                    self.defaults[p.arg] = d
        else:
            self.defaults = {}
        self.paths = {}      # statement -> path of enclosing lists
        self._index(self.body, (), ())

    @property
    def body(self):
        return self.node.body

    def _index(self, stmts, path, ifs):
        path = (*path, id(stmts))
        for stmt in stmts:
            self.paths[id(stmt)] = (path, ifs)
            self._record(stmt, path, ifs)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if block:
                    inner = ((*ifs, (stmt, field)) if isinstance(stmt, ast.If)
                             else ifs)
                    self._index(block, path, inner)
            for handler in getattr(stmt, "handlers", ()):
                self._index(handler.body, path, ifs)
            for case in getattr(stmt, "cases", ()):
                self._index(case.body, path, ifs)

    def _record(self, stmt, path, ifs):
        if isinstance(stmt, ast.Assign):
            pairs = [(t, stmt.value) for t in stmt.targets]
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            pairs = [(stmt.target, stmt.value)]
        elif isinstance(stmt, (ast.AugAssign, ast.For, ast.AsyncFor)):
            pairs = [(stmt.target, UNK)]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            pairs = [(i.optional_vars, UNK) for i in stmt.items
                     if i.optional_vars is not None]
        else:
            return
        for target, value in pairs:
            self._add(target, value, (stmt.lineno, path, ifs))

    def _add(self, target, value, where):
        line, path, ifs = where
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._add(t, UNK, where)
            return
        key = dotted(target)
        if key:
            self.defs.setdefault(key, []).append((line, path, value, ifs))

    def reaching(self, key, line, where):
        """The assignments of `key` a use at `line` can see: the last one
        on every path to it, and those after it in branches."""
        defs = [d for d in self.defs.get(key, ()) if d[0] < line]
        if not defs:
            return None
        path = where[0] if where else ()
        dominating = [d for d in defs if path[:len(d[1])] == d[1]]
        start = max((d[0] for d in dominating), default=-1)
        return [d for d in defs if d[0] >= start]


class Program:
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
        self.ddp_attrs = set()   # `self.model` = DDP(...) anywhere
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
                    if isinstance(t, ast.Attribute):
                        self.ddp_attrs.add(t.attr)

    # -- values ------------------------------------------------------

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
        return frozenset(UNK if v is UNK else not v
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
        if isinstance(node, ast.Attribute) and node.attr in self.ddp_attrs:
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
        a, end_a = self.walk(stmt.body, ctx, depth, stack)
        b, end_b = self.walk(stmt.orelse, ctx, depth, stack)
        if a or b:
            out.append(("alt", a, b))
        return out, (end_a if end_a and end_b else None)

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
            bound[p] = self.value(arg, ctx)
        for kw in call.keywords:
            if kw.arg in scope.params:
                bound[kw.arg] = self.value(kw.value, ctx)
        for p, d in scope.defaults.items():
            if p not in bound and not RANK_NAME.search(p):
                bound[p] = self.value(d, Ctx(self, scope, ctx.r, {}))
        return bound


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
        if v is UNK or v == UNK:
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
    if a is UNK or b is UNK or a == UNK or b == UNK:
        return UNK
    a, b = _norm(a), _norm(b)
    if isinstance(op, (ast.Is, ast.IsNot)):
        if a is not None and b is not None:
            return UNK
        return (a is b) == isinstance(op, ast.Is)
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
