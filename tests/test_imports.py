"""The package's import graph, read from the source (every import
statement, those inside functions too): no cycle; the rank side never
reaches the kernel side; each subpackage imports only what its docstring
allows. A move or a new import that breaks the layering fails here."""
import ast
import pathlib
import subprocess
import sys

import ddpdemo

PACKAGE = pathlib.Path(ddpdemo.__file__).parent
# What runs inside a rank (an engine, a torchrun process, the guard and
# the fork server), and what it needs.
RANK_SIDE = {"ddpdemo.runtime.engine", "ddpdemo.runtime.guard",
             "ddpdemo.runtime.forkserver", "ddpdemo.flight",
             "ddpdemo.devices", "ddpdemo.launch", "ddpdemo.errors",
             "ddpdemo.ledger"}
# The notebook kernel's side of a cluster.
KERNEL_SIDE = {f"ddpdemo.runtime.{m}" for m in (
    "cluster", "engines", "placement", "ssh", "batch", "outcome", "watch", "magic",
    "progress", "group", "options")}
KERNEL_SIDE |= {f"ddpdemo.runtime.{m}" for m in (
    "controller", "forks", "enginesets", "background")}
# What ddpdemo.runtime may import of ddpdemo outside itself (its
# docstring says so too).
RUNTIME_MAY_IMPORT = {"ddpdemo.errors", "ddpdemo.ledger", "ddpdemo.flight",
                      "ddpdemo.devices"}


def module_names():
    """{dotted name: file} of every module of the package."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name, path, known):
    """The package's modules `name` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[:len(base) - node.level + 1]
                module = ".".join(parent + ([node.module] if node.module
                                            else []))
            else:
                module = node.module
            # `from pkg import mod` imports the submodule pkg.mod.
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known
                       else module for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def graph():
    known = module_names()
    return {name: imports(name, path, known) for name, path in known.items()}


def find_cycle(edges):
    """One import cycle as a list of names, or None."""
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return trail[trail.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt, trail + [nxt])
                if cycle:
                    return cycle
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node, [node])
            if cycle:
                return cycle
    return None


def reachable(edges, start):
    seen, todo = set(), list(start)
    while todo:
        node = todo.pop()
        for nxt in edges.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == \
        ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_function_level_and_relative_imports():
    edges = graph()
    # bench imports Cluster inside a function, through `from . import`.
    assert "ddpdemo" in edges["ddpdemo.bench"]
    assert "ddpdemo.runtime.cluster" in edges["ddpdemo"]
    assert "ddpdemo.flight" in edges["ddpdemo.runtime.outcome"]
    assert "ddpdemo.runtime.guard" in edges["ddpdemo.runtime.forkserver"]


def test_no_import_cycle():
    assert find_cycle(graph()) is None


def test_the_rank_side_never_reaches_the_kernel_side():
    edges = graph()
    reached = reachable(edges, RANK_SIDE)
    assert not reached & KERNEL_SIDE, sorted(reached & KERNEL_SIDE)


def test_the_runtime_imports_only_what_its_docstring_allows():
    edges = graph()
    runtime = {n for n in edges if n.startswith("ddpdemo.runtime")}
    outside = set().union(*(edges[n] for n in runtime)) - runtime
    assert outside <= RUNTIME_MAY_IMPORT, sorted(outside - RUNTIME_MAY_IMPORT)
    for name in RUNTIME_MAY_IMPORT:
        assert name in ddpdemo.runtime.__doc__


def test_only_bench_reaches_into_the_book_tooling():
    edges = graph()
    users = {n for n, targets in edges.items()
             if not n.startswith("ddpdemo.book")
             and any(t.startswith("ddpdemo.book") for t in targets)}
    assert users <= {"ddpdemo.bench"}, users
    # And the book tooling imports nothing of ddpdemo outside itself.
    book = {n for n in edges if n.startswith("ddpdemo.book")}
    outside = set().union(*(edges[n] for n in book)) - book
    assert not outside, outside


def test_a_rank_loads_no_client_side_module():
    """What a rank imports, really imported in a fresh interpreter: none
    of the kernel side, and not ipyparallel's client."""
    code = ("import sys\n"
            "import ddpdemo.runtime.engine, ddpdemo.flight, ddpdemo.launch\n"
            "import ddpdemo.runtime.guard, ddpdemo.runtime.forkserver\n"
            "print('\\n'.join(sorted(sys.modules)))\n")
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True,
                                capture_output=True, text=True,
                                timeout=120).stdout.split())
    assert not loaded & KERNEL_SIDE, sorted(loaded & KERNEL_SIDE)
    assert "ipyparallel.client" not in loaded
    assert not any(m.startswith("ddpdemo.book") for m in loaded)
