"""`ddpdemo.check`'s reading of one file: what it imports, its
functions, and for each function (or the module's top level) where each
name is assigned, for a small reaching-definitions question (which
assignments a use can see). Pure `ast`: the reader's code is never
imported or run. ddpdemo.triage.checkvalues evaluates what these
assignments say per rank; checkflow walks the functions.
"""
import ast
import re

RANKS = (0, 1, 2, 3)
UNK = "<unknown>"          # a value the check cannot know
DDPV = "<ddp model>"       # a DistributedDataParallel object
NOTNONE = "<not None>"     # an object a caller passed: not None

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
