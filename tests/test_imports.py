"""The package's import graph, read from the source (every import
statement, those inside functions too): no cycle between modules, nor
between the package's parts (its top level, ddpdemo.runtime,
ddpdemo.book, ddpdemo.examples); the rank side never reaches the kernel
side; each subpackage imports only what its docstring allows. Then what
a rank, the guard, the fork server and a torchrun example really load,
each in a fresh interpreter. A move or a new import that breaks the
layering fails here."""
import ast
import pathlib
import subprocess
import sys

import ddpdemo
import ddpdemo.runtime
from ddpdemo.runtime import engine, flight, forkserver, guard, torchversion

import pytest

pytestmark = pytest.mark.fast

PACKAGE = pathlib.Path(ddpdemo.__file__).parent
# The package's parts: a module belongs to the deepest of these that holds
# it; the top level is "ddpdemo".
PARTS = ("ddpdemo.runtime", "ddpdemo.book", "ddpdemo.examples",
         "ddpdemo.triage")
# What runs inside a rank (an engine, a torchrun process, the guard and
# the fork server), and what it needs.
RANK_SIDE = {f"ddpdemo.runtime.{m}" for m in (
    "engine", "guard", "forkserver", "flight", "devices", "errors",
    "ledger", "torchversion", "rendezvous")} | {"ddpdemo.launch"}
# The notebook kernel's side of a cluster.
KERNEL_SIDE = {f"ddpdemo.runtime.{m}" for m in (
    "cluster", "engines", "placement", "ssh", "batch", "outcome", "watch",
    "magic", "progress", "group", "options", "controller", "forks",
    "enginesets", "background")}
# What runs ranks and scripts from a notebook: none of it belongs in a
# torchrun script.
NOTEBOOK_SIDE = KERNEL_SIDE | {"ddpdemo.runtime.processes", "ddpdemo.scripts",
                               "ddpdemo.nodes", "ddpdemo.book.bench",
                               "ddpdemo.interactive"}
# The top level holds what the chapters import (issue 48), the command
# shims `python -m ddpdemo.explain` and `ddpdemo.check` included.
TOP_LEVEL_LIMIT = 20


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


def part(name):
    """The part of the package a module belongs to."""
    return next((p for p in PARTS if name == p or name.startswith(p + ".")),
                "ddpdemo")


def parts_graph(edges):
    """The graph between the package's parts: an edge where a module of
    one imports a module of another."""
    out = {}
    for name, targets in edges.items():
        for target in targets:
            if part(target) != part(name):
                out.setdefault(part(name), set()).add(part(target))
    return out


def loaded_by(code):
    """The modules a fresh interpreter loads running `code` (beyond what
    it had loaded at start-up)."""
    probe = ("import sys\n_before = set(sys.modules)\n" + code
             + "\nprint('\\n'.join(sorted(set(sys.modules) - _before)))\n")
    return set(subprocess.run([sys.executable, "-c", probe], check=True,
                              capture_output=True, text=True,
                              timeout=120).stdout.split())


def ddpdemo_modules(loaded):
    return {m for m in loaded if m == "ddpdemo" or m.startswith("ddpdemo.")}


def find_cycle(edges):
    """One import cycle as a list of names, or None."""
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return [*trail[trail.index(nxt):], nxt]
            if nxt not in state:
                cycle = visit(nxt, [*trail, nxt])
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
    # bench imports Cluster inside a function, through `from .. import`.
    assert "ddpdemo" in edges["ddpdemo.book.bench"]
    assert "ddpdemo.runtime.cluster" in edges["ddpdemo"]
    assert "ddpdemo.runtime.flight" in edges["ddpdemo.runtime.outcome"]
    assert "ddpdemo.runtime.guard" in edges["ddpdemo.runtime.forkserver"]


def test_the_parts_graph_sees_a_cycle_between_parts():
    # A runtime module importing a lesson module would close a cycle
    # that no single module's imports show.
    edges = {"ddpdemo.ring": {"ddpdemo.runtime.engine"},
             "ddpdemo.runtime.engine": {"ddpdemo.quote"}}
    assert find_cycle(parts_graph(edges)) == \
        ["ddpdemo", "ddpdemo.runtime", "ddpdemo"]
    assert part("ddpdemo.runtime") == "ddpdemo.runtime"
    assert part("ddpdemo.runtimes") == "ddpdemo"


def test_no_import_cycle():
    assert find_cycle(graph()) is None


def test_no_import_cycle_between_the_parts():
    """The top level may use the runtime; the runtime uses nothing back,
    and nothing uses the book's tooling (whose benchmark measures the
    rest)."""
    parts = parts_graph(graph())
    assert find_cycle(parts) is None, parts
    assert parts.get("ddpdemo.runtime", set()) == set()
    assert not {p for p, targets in parts.items()
                if "ddpdemo.book" in targets}, parts


def top_level_modules():
    """The modules at the top of the package (not its subpackages)."""
    return sorted(p.stem for p in PACKAGE.glob("*.py")
                  if p.name != "__init__.py")


def test_the_top_level_holds_at_most_twenty_modules():
    modules = top_level_modules()
    assert len(modules) <= TOP_LEVEL_LIMIT, modules
    # The counter sees the package's own modules and no subpackage.
    assert "ring" in modules and "runtime" not in modules


def test_no_module_replaces_itself_in_sys_modules():
    """A module that swaps itself out of sys.modules surprises readers
    and tools (the alias modules of issue 48 did)."""
    assert swaps_itself("import sys\nsys.modules[__name__] = sys\n")
    for name, path in module_names().items():
        assert not swaps_itself(path.read_text()), name


def swaps_itself(source):
    """Whether `source` assigns sys.modules[__name__]."""
    return any(ast.unparse(target) == "sys.modules[__name__]"
               for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.Assign) for target in node.targets)


def test_the_chapters_short_names_are_the_runtimes_modules():
    """`from ddpdemo import ledger` (and errors, flight, devices) gives
    the runtime's module, where the code lives; no ddpdemo.ledger module
    exists besides it."""
    for name in ddpdemo.RUNTIME_MODULES:
        module = getattr(ddpdemo, name)
        assert module.__name__ == f"ddpdemo.runtime.{name}"
        assert f"ddpdemo.{name}" not in module_names()
    from ddpdemo import ledger
    from ddpdemo.runtime.ledger import Ledger
    assert ledger.Ledger is Ledger


def test_the_packages_names_load_on_first_use():
    for name in ddpdemo.__all__:
        assert getattr(ddpdemo, name).__name__ == name
    assert ddpdemo.HangError.__module__ == "ddpdemo.runtime.errors"


def test_the_rank_side_never_reaches_the_kernel_side():
    edges = graph()
    reached = reachable(edges, RANK_SIDE)
    assert not reached & KERNEL_SIDE, sorted(reached & KERNEL_SIDE)


def test_the_runtime_imports_nothing_outside_itself():
    edges = graph()
    runtime = {n for n in edges if part(n) == "ddpdemo.runtime"}
    outside = set().union(*(edges[n] for n in runtime)) - runtime
    assert not outside, sorted(outside)


def test_only_the_benchmark_reaches_out_of_the_book_tooling():
    """Nothing of ddpdemo imports the tooling; of the tooling, only the
    benchmark (ddpdemo.book.bench, which measures the runtime and the
    book) imports the rest of ddpdemo."""
    edges = graph()
    users = {n for n, targets in edges.items()
             if part(n) != "ddpdemo.book"
             and any(part(t) == "ddpdemo.book" for t in targets)}
    assert not users, users
    book = {n for n in edges if part(n) == "ddpdemo.book"}
    reaching = {n for n in book if edges[n] - book}
    assert reaching == {"ddpdemo.book.bench"}, reaching


def test_the_triage_commands_import_only_the_runtime():
    """ddpdemo.triage (explain, and what reads a reader's job) may use
    the runtime and nothing else of ddpdemo: the commands run without
    the lessons, the book's tooling or a cluster."""
    edges = graph()
    triage = {n for n in edges if part(n) == "ddpdemo.triage"}
    assert triage, "ddpdemo.triage has no module"
    outside = set().union(*(edges[n] for n in triage)) - triage
    assert all(part(n) == "ddpdemo.runtime" for n in outside), \
        sorted(outside)
    reached = reachable(edges, triage)
    assert not reached & KERNEL_SIDE, sorted(reached & KERNEL_SIDE)


def test_a_torchrun_example_reaches_nothing_of_the_notebook_side():
    edges = graph()
    for name in edges:
        if part(name) == "ddpdemo.examples" and name != "ddpdemo.examples":
            reached = reachable(edges, [name])
            assert not reached & NOTEBOOK_SIDE, \
                (name, sorted(reached & NOTEBOOK_SIDE))


def test_importing_ddpdemo_loads_nothing_else():
    assert ddpdemo_modules(loaded_by("import ddpdemo")) == {"ddpdemo"}


def test_the_guard_and_the_fork_server_load_the_standard_library_only():
    """What the guard and the fork server import, really imported in a
    fresh interpreter (as `python -m` would): of ddpdemo, themselves, the
    runtime's torch check and `waiting`; outside it, the standard
    library."""
    own = {"ddpdemo", "ddpdemo.runtime", torchversion.__name__,
           guard.__name__}
    for module, allowed in ((guard, own),
                            (forkserver, own | {forkserver.__name__,
                                                "ddpdemo.runtime.waiting"})):
        loaded = loaded_by(f"import {module.__name__}")
        assert ddpdemo_modules(loaded) == allowed, module.__name__
        others = {m.split(".")[0] for m in loaded - allowed}
        assert others <= set(sys.stdlib_module_names), \
            sorted(others - set(sys.stdlib_module_names))


def test_a_rank_loads_no_client_side_module():
    """What a rank imports, really imported in a fresh interpreter: none
    of the kernel side, no lesson or tooling module, and not
    ipyparallel's client."""
    loaded = loaded_by(f"import {engine.__name__}, {flight.__name__}\n"
                       "import ddpdemo.launch")
    mine = ddpdemo_modules(loaded)
    assert not mine & KERNEL_SIDE, sorted(mine & KERNEL_SIDE)
    assert mine <= RANK_SIDE | {"ddpdemo", "ddpdemo.runtime",
                                "ddpdemo.runtime.waiting"}, sorted(mine)
    assert "ipyparallel.client" not in loaded


def test_a_torchrun_example_loads_nothing_of_the_notebook_side():
    examples = sorted(n for n in graph()
                      if part(n) == "ddpdemo.examples"
                      and n != "ddpdemo.examples")
    loaded = loaded_by("\n".join(f"import {n}" for n in examples))
    assert set(examples) <= loaded     # the probe imported them
    assert not loaded & NOTEBOOK_SIDE, sorted(loaded & NOTEBOOK_SIDE)
    assert not any(m.startswith("ddpdemo.book") for m in loaded)
    assert "ipyparallel.client" not in loaded
