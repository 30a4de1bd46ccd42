"""`ddpdemo.check`'s rules, each the book's lesson of one section, read
off a script's `ast` (ddpdemo.triage.checkflow says which ranks take
which branch and which collectives each reaches).

Each rule: its id, the section that shows it live (notebook, label),
and a function that yields (module, line, rule id, why, fix). What a
rule cannot decide from the text alone it leaves silent: a false alarm
costs the reader's trust in the next finding (README: the rules, and
the ones left out).
"""
import ast
import re

from .checkflow import (DDP_NAMES, DDPV, RANKS, UNK, Ctx, dotted,
                        first_difference, last_name, splits)

# id -> (notebook, label): the section that shows the rule live.
SECTIONS = {
    "collective-on-some-ranks": ("05_val_dataloader_deadlock",
                                 "val-deadlock"),
    "ddp-forward-on-some-ranks": ("08_when_ddp_hangs",
                                  "ddp-validation-rank0"),
    "lone-decision": ("08_when_ddp_hangs", "uneven-inputs"),
    "sampler-without-set-epoch": ("06_seeds", "set-epoch"),
    "same-seed-on-every-rank": ("06_seeds", "same-seed"),
    "split-after-per-rank-seed": ("06_seeds", "sampler-seed"),
    "cuda-before-set-device": ("00b_launching", "gpu-ready-script"),
    "no-device-for-rank": ("00b_launching", "gpu-ready-script"),
    "load-without-map-location": ("08_when_ddp_hangs",
                                  "checkpoint-one-writer"),
    "save-ddp-wrapper": ("08_when_ddp_hangs", "checkpoint-one-writer"),
    "load-on-some-ranks-after-ddp": ("07_inside_ddp", "ddp-wrapping"),
    "int-divide-after-all-reduce": ("02_reduce_mean", "int64-pitfall"),
    "reduce-read-off-dst": ("01_all_reduce", None),
}
SEEDS = {"manual_seed", "seed", "manual_seed_all", "init_seeds",
         "set_seed", "seed_everything", "set_random_seed", "setup_seed"}
INT_DTYPES = {"long", "int", "int64", "int32", "int16", "int8", "uint8"}
PER_RANK = re.compile(r"loss", re.I)
NAN_TESTS = {"isnan", "isinf", "isfinite"}
SHARE = {"all_reduce", "broadcast", "all_gather", "all_gather_object",
         "broadcast_object_list", "all_gather_into_tensor", "reduce"}


def _src(module, node):
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
    from .checkflow import truth
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
    for node in _own_nodes(scope):
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
    test = _src(module, guard)
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
        for node in _own_nodes(scope):
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
                f"`{kind}` under `{_src(scope.module, split)}` (line "
                f"{split.lineno}): only some ranks can take it, and the "
                f"others wait in the loop's next collective or backward",
                "decide on one rank, broadcast the decision "
                "(broadcast_object_list), and let every rank take it "
                "(YOLOv5's DDP early stopping)")
    names = _per_rank(program, scope, if_node.test, shared)
    if not names:
        return None
    return (scope.module, if_node.lineno, "lone-decision",
            f"`{kind}` under `{_src(scope.module, if_node)}`: {names} is "
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
    for node in _own_nodes(scope):
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
                            f"`{_src(scope.module, if_node)}`)")
    return None


# -- script-wide facts ---------------------------------------------------

def _calls(module):
    return module.calls


def _kw(call, name):
    return next((k.value for k in call.keywords if k.arg == name), None)


def sampler_epochs(program):
    """sampler-without-set-epoch: a shuffling DistributedSampler, an
    epoch loop in the files given, and no `set_epoch` call anywhere."""
    calls = [(m, c) for m in program.modules for c in _calls(m)]
    if any(last_name(c.func) == "set_epoch" for _, c in calls):
        return
    epoch_loop = any(
        isinstance(n, ast.For) and "epoch" in ast.unparse(n.target).lower()
        for m in program.modules for n in ast.walk(m.tree))
    if not epoch_loop:
        return
    for module, call in calls:
        if last_name(call.func) != "DistributedSampler":
            continue
        shuffle = _kw(call, "shuffle")
        if isinstance(shuffle, ast.Constant) and shuffle.value is False:
            continue
        yield (module, call.lineno, "sampler-without-set-epoch",
               "this DistributedSampler shuffles with seed + epoch, and "
               "nothing calls its set_epoch: every epoch draws the same "
               "order", "call `sampler.set_epoch(epoch)` at the top of "
               "each epoch, before iterating the loader")


def _rank_dependent(program, module, call):
    scope = program.scopes[id(module.tree)]
    for arg in call.args[:1]:
        vals = {r: Ctx(program, scope, r, {}).value(arg) for r in RANKS}
        if len(set(vals.values())) > 1 or any(UNK in v for v in
                                               vals.values()):
            return True
        for n in ast.walk(arg):
            if isinstance(n, (ast.Name, ast.Attribute)) and \
                    re.search(r"rank|seed_offset", ast.unparse(n), re.I):
                return True
    return False


def _distributed(program):
    return any(m.is_collective(c) or last_name(c.func) in (
        "init_process_group", "DistributedSampler", *DDP_NAMES)
        for m in program.modules for c in _calls(m))


def _seed_calls(program):
    """(module, seeding call, whether its seed depends on the rank)."""
    for module in program.modules:
        for call in _calls(module):
            if last_name(call.func) in SEEDS and call.args:
                yield module, call, _rank_dependent(program, module, call)


def seeds(program):
    """same-seed-on-every-rank: a seed that is a literal constant in a
    distributed script that augments at random; split-after-per-rank-
    seed: random_split without a generator after a seed that depends on
    the rank."""
    if not _distributed(program):
        return
    augments = any(
        re.search(r"\bRandom[A-Z]|random_perspective|RandAugment|"
                  r"TrivialAugment|AutoAugment", "\n".join(m.lines))
        for m in program.modules)
    calls = list(_seed_calls(program))
    for module, call, per_rank in calls:
        if (augments and not per_rank
                and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, int)):
            yield (module, call.lineno, "same-seed-on-every-rank",
                   f"`{_src(module, call)}` gives every rank the same "
                   f"random stream: the same crops and flips on every "
                   f"rank, step after step",
                   "seed each rank differently for augmentation "
                   "(`seed + rank`), keeping the sampler's own seed "
                   "shared")
    seeded = [(m, c.lineno) for m, c, per_rank in calls if per_rank]
    for module in program.modules:
        for call in _calls(module):
            if (last_name(call.func) == "random_split"
                    and _kw(call, "generator") is None
                    and len(call.args) < 3
                    and any(m is module and line < call.lineno
                            for m, line in seeded)):
                yield (module, call.lineno, "split-after-per-rank-seed",
                       "random_split draws from the global generator, "
                       "seeded per rank above: each rank splits the data "
                       "differently, so train and validation overlap "
                       "across ranks",
                       "pass a generator seeded alike on every rank: "
                       "`generator=torch.Generator().manual_seed(0)`")


def _path_of(scope, node):
    """The statement lists enclosing `node`: its innermost statement's."""
    best = ()
    for stmt in _own_nodes(scope):
        if (isinstance(stmt, ast.stmt)
                and stmt.lineno <= node.lineno <= stmt.end_lineno):
            where = scope.paths.get(id(stmt))
            if where and len(where[0]) > len(best):
                best = where[0]
    return best


CUDA_CALLS = {"synchronize", "empty_cache", "memory_allocated",
              "max_memory_allocated", "reset_peak_memory_stats", "Stream",
              "Event", "current_stream", "mem_get_info", "init",
              "memory_reserved", "max_memory_reserved"}


def _cuda_use(call):
    name = last_name(call.func)
    text = dotted(call.func) or ""
    if name == "cuda" and isinstance(call.func, ast.Attribute) and \
            not text.startswith("torch.cuda") and not call.args:
        return True
    if name == "to" and call.args and \
            isinstance(call.args[0], ast.Constant) and \
            call.args[0].value == "cuda":
        return True
    device = _kw(call, "device")
    if isinstance(device, ast.Constant) and device.value == "cuda":
        return True
    return text.startswith("torch.cuda.") and name in CUDA_CALLS


def devices(program):
    """cuda-before-set-device and no-device-for-rank."""
    calls = [(m, c) for m in program.modules for c in _calls(m)]
    set_device = [(m, c) for m, c in calls
                  if last_name(c.func) == "set_device"]
    for scope in program.scopes.values():
        sets = [c for c in _own_nodes(scope) if isinstance(c, ast.Call)
                and last_name(c.func) == "set_device"]
        if not sets:
            continue
        first = min(sets, key=lambda c: c.lineno)
        path = _path_of(scope, first)
        for c in _own_nodes(scope):
            # a use that runs on every path to set_device: its statement
            # list encloses set_device's (not a sibling branch)
            if (isinstance(c, ast.Call) and c.lineno < first.lineno
                    and _cuda_use(c)
                    and path[:len(_path_of(scope, c))] ==
                    _path_of(scope, c)):
                yield (scope.module, c.lineno, "cuda-before-set-device",
                       f"`{_src(scope.module, c)}` runs before "
                       f"`set_device` (line {first.lineno}): it makes a "
                       f"CUDA context on cuda:0 on every rank",
                       "call `torch.cuda.set_device(local_rank)` first")
    if set_device or not any(_cuda_use(c) for _, c in calls):
        return
    if any(_kw(c, "device_id") is not None for _, c in calls
           if last_name(c.func) == "init_process_group"):
        return
    indexed = any(last_name(c.func) in ("cuda", "to", "device")
                  and c.args and not isinstance(c.args[0], ast.Constant)
                  for _, c in calls)
    for module, call in calls:
        if last_name(call.func) in DDP_NAMES and len(call.args) < 2 \
                and _kw(call, "device_ids") is None and not indexed:
            yield (module, call.lineno, "no-device-for-rank",
                   "DDP without device_ids, no device_id at init and no "
                   "set_device: every rank's current CUDA device is "
                   "cuda:0, so all ranks crowd one GPU (torch's barrier: "
                   "'may use default device 0, causing issues like hang')",
                   "`torch.cuda.set_device(local_rank)` and "
                   "`DDP(model, device_ids=[local_rank])`, or "
                   "`init_process_group(..., device_id=device)`")


def _ddp_names(scope):
    """Names (and self attributes) set to DDP(...) in this scope, with
    the line; and the module each wrapped."""
    wrapped = {}
    for key, defs in scope.defs.items():
        for line, _path, value, _ifs in defs:
            if isinstance(value, ast.Call) and \
                    last_name(value.func) in DDP_NAMES:
                inner = dotted(value.args[0]) if value.args else None
                wrapped[key] = (line, inner)
    return wrapped


def checkpoints(program):
    """load-without-map-location, save-ddp-wrapper,
    load-on-some-ranks-after-ddp."""
    gpu = _distributed(program) and any(
        _cuda_use(c) or last_name(c.func) == "set_device"
        for m in program.modules for c in _calls(m))
    strips = any(("module." in line and ("replace" in line or "[7:]" in line
                                        or "startswith" in line))
                 or "consume_prefix_in_state_dict_if_present" in line
                 for m in program.modules for line in m.lines)
    for scope in program.scopes.values():
        wrapped = _ddp_names(scope)
        for node in _own_nodes(scope):
            if not isinstance(node, ast.Call):
                continue
            if gpu:
                yield from _load_without_map(scope, node)
            if wrapped and not strips:
                yield from _save_wrapper(scope, node, wrapped)
            if wrapped:
                yield from _load_on_some(program, scope, node, wrapped)


def _load_without_map(scope, node):
    if (dotted(node.func) == "torch.load"
            and _kw(node, "map_location") is None
            and len(node.args) < 2 and not _maps_elsewhere(scope)):
        yield (scope.module, node.lineno, "load-without-map-location",
               "torch.load puts each tensor back on the device it was "
               "saved from: on every rank, cuda:0",
               "`torch.load(path, map_location=device)`")


def _save_wrapper(scope, node, wrapped):
    if dotted(node.func) != "torch.save":
        return
    for sub in ast.walk(node):
        if not (isinstance(sub, ast.Call)
                and last_name(sub.func) == "state_dict"
                and isinstance(sub.func, ast.Attribute)):
            continue
        base = dotted(sub.func.value)
        if base in wrapped and wrapped[base][0] < node.lineno:
            yield (scope.module, node.lineno, "save-ddp-wrapper",
                   f"`{base}` is the DDP wrapper: its state_dict's keys "
                   f"start with `module.`, which a plain model's "
                   f"load_state_dict refuses",
                   f"save `{base}.module.state_dict()`")


def _load_on_some(program, scope, node, wrapped):
    if not (last_name(node.func) == "load_state_dict"
            and isinstance(node.func, ast.Attribute)):
        return
    base = (dotted(node.func.value) or "").split(".module")[0]
    for key, (line, inner) in wrapped.items():
        if line >= node.lineno or base not in (key, inner):
            continue
        guard = _rank_guard(program, scope, node)
        if guard is not None:
            yield (scope.module, node.lineno, "load-on-some-ranks-after-ddp",
                   f"weights loaded under `{_src(scope.module, guard)}` "
                   f"after DDP(...) (line {line}) wrapped the model: DDP "
                   f"broadcast rank 0's weights at wrapping, not now, so "
                   f"the ranks train different models",
                   "load on every rank (map_location) before wrapping, "
                   "or load then wrap")
            return


def _maps_elsewhere(scope):
    """Whether this scope also calls torch.load with map_location: the
    script chose where each load goes (imagenet's `args.gpu is None`
    branch keeps the saved devices on purpose)."""
    return any(isinstance(n, ast.Call) and dotted(n.func) == "torch.load"
               and _kw(n, "map_location") is not None
               for n in _own_nodes(scope))


def _own_nodes(scope):
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


def _rank_guard(program, scope, node):
    """The innermost if of this scope that parts the ranks and encloses
    `node`, else None."""
    found = None
    for stmt in _own_nodes(scope):
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


def reductions(program):
    """int-divide-after-all-reduce and reduce-read-off-dst."""
    for scope in program.scopes.values():
        ints = _int_tensors(scope)
        reduced = {}        # tensor -> (op, line, dst)
        for node in sorted((n for n in _own_nodes(scope)
                            if hasattr(n, "lineno")),
                           key=lambda n: (n.lineno, n.col_offset)):
            if isinstance(node, ast.Call) and node.args:
                _note_reduction(scope.module, node, ints, reduced)
            divided = _divided(node)
            if divided and reduced.get(divided, ("",))[0] == "all_reduce":
                yield _int_finding(scope.module, node, divided)
            if isinstance(node, (ast.If, ast.While, ast.Return)):
                yield from _read_off_dst(program, scope, node, reduced)


def _note_reduction(module, call, ints, reduced):
    op = module.is_collective(call)
    target = dotted(call.args[0])
    if op == "all_reduce" and target in ints:
        reduced[target] = ("all_reduce", call.lineno, None)
    elif op == "reduce" and target:
        dst = _kw(call, "dst") or (call.args[1] if len(call.args) > 1
                                   else None)
        reduced[target] = ("reduce", call.lineno, dst)


def _divided(node):
    """The tensor a node divides in place (`t /= n`, `t.div_(n)`)."""
    if isinstance(node, ast.AugAssign) and isinstance(
            node.op, (ast.Div, ast.FloorDiv)):
        return dotted(node.target)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("div_", "floor_divide_")):
        return dotted(node.func.value)
    return None


def _int_finding(module, node, target):
    return (module, node.lineno, "int-divide-after-all-reduce",
            f"`{target}` is an integer tensor: `/=` after its all_reduce "
            f"raises (torch will not store a float in it) and `//=` "
            f"floors the mean silently",
            f"divide into a new float tensor: `{target} / world_size`, or "
            f"all_reduce sums and counts and divide once")


def _read_off_dst(program, scope, node, reduced):
    test = node.test if isinstance(node, (ast.If, ast.While)) else node.value
    if test is None:
        return
    used = {dotted(n) for n in ast.walk(test)
            if isinstance(n, (ast.Name, ast.Attribute))}
    for target, (op, line, dst) in reduced.items():
        if op != "reduce" or target not in used or line >= node.lineno:
            continue
        guard = _rank_guard(program, scope, node)
        if guard is not None:
            continue
        yield (scope.module, node.lineno, "reduce-read-off-dst",
               f"`{target}` holds reduce's result only on dst "
               f"({ast.unparse(dst) if dst is not None else '?'}); "
               f"every other rank decides here on a partial value",
               "read it on dst alone, or use all_reduce if every rank "
               "needs it")


def _int_tensors(scope):
    """Names this scope sets to an integer tensor."""
    out = set()
    for key, defs in scope.defs.items():
        for *_, value, _ifs in defs:
            if isinstance(value, ast.Call) and _is_int_tensor(value):
                out.add(key)
    return out


def _is_int_tensor(call):
    name = last_name(call.func)
    dtype = _kw(call, "dtype")
    if dtype is not None:
        return last_name(dtype) in INT_DTYPES
    if name in ("LongTensor", "IntTensor"):
        return True
    if name in ("long", "int") and isinstance(call.func, ast.Attribute):
        return True
    if name == "tensor" and call.args:
        data = call.args[0]
        consts = [n for n in ast.walk(data) if isinstance(n, ast.Constant)]
        return bool(consts) and all(
            type(c.value) is int for c in consts) and not any(
            isinstance(n, (ast.Name, ast.Call, ast.Attribute))
            for n in ast.walk(data))
    return False


RULES = (rank_branches, lone_decisions, sampler_epochs, seeds, devices,
         checkpoints, reductions)
