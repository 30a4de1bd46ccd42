"""`ddpdemo.check`'s rules on ranks that part: a collective or a DDP
forward that only some ranks reach (chapters 5 and 8), and a decision
one rank can take alone before a collective or a backward (chapter 8's
uneven inputs). checkflow gives each function's collectives per rank;
this module finds where two ranks' lists part, names the rank test that
parts them, and says it in words. The helpers at the end serve the
other rules too (ddpdemo.triage.checkrules).
"""
import ast
import re

from .checkflow import first_difference
from .checkread import DDPV, RANKS, UNK, last_name
from .checkvalues import Ctx, splits, truth

PER_RANK = re.compile(r"loss", re.I)
NAN_TESTS = {"isnan", "isinf", "isfinite"}
SHARE = {"all_reduce", "broadcast", "all_gather", "all_gather_object",
         "broadcast_object_list", "all_gather_into_tensor", "reduce"}


def source_of(module, node):
    if isinstance(node, ast.If):
        text = f"if {ast.unparse(node.test)}:"
    else:
        text = module.lines[node.lineno - 1].strip()
    return text if len(text) <= 60 else text[:57] + "..."


def _ranks_text(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(
        map(str, ranks))


def _chain(chain):
    """`create_dataloader -> torch_distributed_zero_first -> barrier`."""
    return " -> ".join(f"{fn}()" for _, _, fn in chain[1:])


def rank_branches(program):
    """collective-on-some-ranks and ddp-forward-on-some-ranks: every
    function (and each module's top level) walked per rank; where two
    ranks' collectives part, the rank test of this function that parts
    them is the finding."""
    seen = set()
    for scope_id, scope in program.scopes.items():
        node = scope.node
        sigs = {r: program.signature(node, {}, r) for r in RANKS}
        for r in RANKS[1:]:
            a, b = first_difference(sigs[0], sigs[r])
            for op in (a, b):
                if op is None:
                    continue
                guard = _guard(program, scope, scope_id, op)
                if guard is None:
                    continue
                site = op[2][0]
                key = (site[0], site[1])
                if key in seen:
                    continue
                seen.add(key)
                yield _branch_finding(scope, op, guard,
                                      _who(program, scope, guard, op))


def _who(program, scope, guard, op):
    """How the ranks part at `guard`, in words: which ranks can take
    the branch that holds `op`, or which leave before it."""
    line = op[2][0][1]
    field = ("body" if any(s.lineno <= line <= s.end_lineno
                           for s in guard.body) else "orelse")
    inside = guard.lineno <= line <= guard.end_lineno
    if inside:
        takers = [r for r in RANKS
                  if _branch_truth(program, scope, guard, field, r)
                  != {False}]
        return f"which only {_ranks_text(takers)} of 4 can take"
    leave = "body" if _leaves(guard.body) or (
        guard.body and isinstance(guard.body[-1], ast.Raise)) else "orelse"
    leavers = [r for r in RANKS
               if _branch_truth(program, scope, guard, leave, r) == {True}]
    return (f"where {_ranks_text(leavers)} of 4 leave before it" if leavers
            else "where some ranks leave before it")


def _truth(program, scope, if_node, r):
    ctx = Ctx(program, scope, r, {}).at_stmt(if_node)
    return truth(ctx.value(if_node.test))


def _guard(program, scope, scope_id, op):
    """The rank test of this function that parts the ranks at `op`: the
    innermost that encloses it, else the last one before it whose
    branch leaves early (`if not is_main_process(): return`)."""
    guards = op[3] if len(op) > 3 else ()
    for sid, if_node in reversed(guards):
        if sid != id(scope):
            continue
        per_rank = {r: _truth(program, scope, if_node, r) for r in RANKS}
        if splits(per_rank):
            return if_node
    line = op[2][0][1]
    best = None
    for node in own_nodes(scope):
        if not isinstance(node, ast.If) or node.lineno > line:
            continue
        inside = node.lineno <= line <= node.end_lineno
        leaves = any(_leaves(b) or (b and isinstance(b[-1], ast.Raise))
                     for b in (node.body, node.orelse))
        if not (inside or leaves):
            continue
        per_rank = {r: _truth(program, scope, node, r) for r in RANKS}
        if splits(per_rank) and (best is None or node.lineno > best.lineno):
            best = node
    return best


def _branch_finding(scope, op, guard, who):
    name, chain = op[1], op[2]
    module = scope.module
    line = chain[0][1]
    where = f" (through {_chain(chain)})" if len(chain) > 1 else ""
    test = source_of(module, guard)
    if name == "DDP forward":
        return (module, line, "ddp-forward-on-some-ranks",
                f"the DDP model is called under `{test}` (line "
                f"{guard.lineno}), {who}: its forward "
                f"broadcasts buffers (and a backward all-reduces), and "
                f"the other ranks never join",
                "call the wrapped module (`model.module(x)`) for "
                "rank-0-only work, or run it on every rank")
    return (module, line, "collective-on-some-ranks",
            f"`{name}`{where} is reached where `{test}` (line "
            f"{guard.lineno}) decides, {who}: the other ranks "
            f"never enter it, and it waits for them",
            "take the collective on every rank, or make the call "
            "not distributed where one rank runs it (YOLOv5: "
            "`create_dataloader(..., rank=-1)`)")


# -- decisions one rank takes alone --------------------------------------

def lone_decisions(program):
    """lone-decision: `break`/`continue`/`return` in a loop that reaches
    a collective or a backward, under a rank test, or under a test of a
    value each rank has its own of (a loss, a NaN test, a value set on
    some ranks only) that no collective shared first."""
    for scope in program.scopes.values():
        shared = None
        for node in own_nodes(scope):
            if not isinstance(node, (ast.For, ast.While, ast.AsyncFor)) \
                    or not _syncs(program, scope, node.body):
                continue
            if shared is None:
                shared = _shared_names(scope)
            for exit_ in _exits(node.body, ()):
                found = _lone(program, scope, node, exit_, shared)
                if found:
                    yield found


def _lone(program, scope, loop, exit_, shared):
    """The finding for one exit of a loop, or None."""
    if_node, kind, field, outer = exit_
    if any(_never(program, scope, i, f)
           for i, f in (*outer, (if_node, field))):
        return None                 # not taken in a distributed run
    if kind == "continue" and not _syncs(
            program, scope, [s for s in loop.body
                             if s.lineno > if_node.end_lineno]):
        return None                 # nothing to wait in after it
    split = next((i for i, f in reversed(outer)
                  if _parts(program, scope, i, f)), None)
    if split is not None:
        return (scope.module, if_node.lineno, "lone-decision",
                f"`{kind}` under `{source_of(scope.module, split)}` (line "
                f"{split.lineno}): only some ranks can take it, and the "
                f"others wait in the loop's next collective or backward",
                "decide on one rank, broadcast the decision "
                "(broadcast_object_list), and let every rank take it "
                "(YOLOv5's DDP early stopping)")
    names = _per_rank(program, scope, if_node.test, shared)
    if not names:
        return None
    return (scope.module, if_node.lineno, "lone-decision",
            f"`{kind}` under `{source_of(scope.module, if_node)}`: {names} is "
            f"this rank's own, so one rank can leave the loop while the "
            f"others wait in its next collective or backward",
            "share the decision first (all_reduce a flag, e.g. with MAX) "
            "and let every rank take it")


def _branch_truth(program, scope, if_node, field, r):
    t = _truth(program, scope, if_node, r)
    if field == "orelse":
        t = frozenset(UNK if v is UNK else not v for v in t)
    return t


def _never(program, scope, if_node, field):
    """Whether no rank of a distributed run takes this branch."""
    return all(_branch_truth(program, scope, if_node, field, r) == {False}
               for r in RANKS)


def _parts(program, scope, if_node, field):
    return splits({r: _branch_truth(program, scope, if_node, field, r)
                   for r in RANKS})


def _exits(stmts, outer):
    """(if, "break"/"continue"/"return", branch, enclosing ifs) for this
    loop's exits, not those of inner loops."""
    for stmt in stmts:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef, ast.For, ast.While,
                             ast.AsyncFor)):
            continue
        if isinstance(stmt, ast.If):
            for field in ("body", "orelse"):
                kind = _leaves(getattr(stmt, field))
                if kind:
                    yield stmt, kind, field, outer
                yield from _exits(getattr(stmt, field),
                                  (*outer, (stmt, field)))
        else:
            for field in ("body", "orelse", "finalbody"):
                yield from _exits(getattr(stmt, field, ()) or (), outer)
            for h in getattr(stmt, "handlers", ()):
                yield from _exits(h.body, outer)


def _leaves(branch):
    for stmt in branch:
        if isinstance(stmt, ast.Break):
            return "break"
        if isinstance(stmt, ast.Continue):
            return "continue"
        if isinstance(stmt, ast.Return):
            return "return"
    return None


def _syncs(program, scope, stmts):
    """Whether these statements reach a collective or a backward."""
    for stmt in stmts:
        for node in program.calls_in(stmt):
            name = last_name(node.func)
            if name == "backward" or scope.module.is_collective(node):
                return True
            ctx = Ctx(program, scope, 0, {}).at_stmt(stmt)
            if DDPV in ctx.value(node.func):
                return True
            target = program.resolve(node, ctx)
            if target and program.signature(target[1], {}, 0):
                return True
    return False


def _shared_names(scope):
    """Names a collective has shared, and names made from them."""
    shared = set()
    for node in own_nodes(scope):
        if (isinstance(node, ast.Call)
                and last_name(node.func) in SHARE):
            for arg in node.args[:1]:
                shared |= {n.id for n in ast.walk(arg)
                           if isinstance(n, ast.Name)}
    for _ in range(2):
        for key, defs in scope.defs.items():
            for *_, value, _ifs in defs:
                if value is UNK:
                    continue
                used = {n.id for n in ast.walk(value)
                        if isinstance(n, ast.Name)}
                if used & shared:       # made from a shared value
                    shared.add(key)
    return shared


def _per_rank(program, scope, test, shared):
    """The name in `test` whose value is this rank's own, else None."""
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and last_name(node.func) in NAN_TESTS:
            inner = {n.id for a in node.args for n in ast.walk(a)
                     if isinstance(n, ast.Name)}
            if isinstance(node.func, ast.Attribute):
                inner |= {n.id for n in ast.walk(node.func.value)
                          if isinstance(n, ast.Name)}
            if inner and not inner & shared:
                return f"the NaN test of `{sorted(inner)[0]}`"
        if not isinstance(node, ast.Name) or node.id in shared:
            continue
        if PER_RANK.search(node.id):
            return f"`{node.id}`"
        for _line, _path, _value, ifs in scope.defs.get(node.id, ()):
            for if_node, _field in ifs:
                per = {r: _truth(program, scope, if_node, r) for r in RANKS}
                if splits(per):
                    return (f"`{node.id}` (set under "
                            f"`{source_of(scope.module, if_node)}`)")
    return None


# -- script-wide facts ---------------------------------------------------

def own_nodes(scope):
    """The nodes of this scope, not of the functions defined in it."""
    if not hasattr(scope, "own"):
        scope.own = list(_walk_own(scope))
    return scope.own


def _walk_own(scope):
    stack = list(scope.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def rank_guard(program, scope, node):
    """The innermost if of this scope that parts the ranks and encloses
    `node`, else None."""
    found = None
    for stmt in own_nodes(scope):
        if isinstance(stmt, ast.If) and stmt.lineno < node.lineno <= \
                getattr(stmt, "end_lineno", 0):
            branch = stmt.body if any(
                n is node for s in stmt.body for n in ast.walk(s)) \
                else stmt.orelse
            per = {r: _truth(program, scope, stmt, r) for r in RANKS}
            if branch is stmt.orelse:
                per = {r: frozenset(UNK if v is UNK else not v for v in t)
                       for r, t in per.items()}
            if splits(per) and (found is None or stmt.lineno > found.lineno):
                found = stmt
    return found
