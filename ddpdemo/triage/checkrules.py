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

from .checkranks import (lone_decisions, own_nodes, rank_branches,
                         rank_guard, source_of)
from .checkread import DDP_NAMES, RANKS, UNK, dotted, last_name
from .checkvalues import Ctx

# id -> (notebook, label): the section that shows the rule live.
SECTIONS = {
    "collective-on-some-ranks": ("evaluation",
                                 "val-deadlock"),
    "ddp-forward-on-some-ranks": ("evaluation", "ddp-validation-rank0"),
    "lone-decision": ("when_ddp_hangs", "rank-decisions"),
    "sampler-without-set-epoch": ("seeds", "set-epoch"),
    "same-seed-on-every-rank": ("seeds", "same-seed"),
    "split-after-per-rank-seed": ("seeds", "sampler-seed"),
    "cuda-before-set-device": ("launching", "gpu-ready-script"),
    "no-device-for-rank": ("launching", "gpu-ready-script"),
    "load-without-map-location": ("checkpoint_resume", "checkpoint-load"),
    "save-ddp-wrapper": ("checkpoint_resume", "checkpoint-module-keys"),
    "load-on-some-ranks-after-ddp": ("inside_ddp", "ddp-wrapping"),
    "int-divide-after-all-reduce": ("reduce_mean", "int64-pitfall"),
    "reduce-read-off-dst": ("all_reduce", None),
}
SEEDS = {"manual_seed", "seed", "manual_seed_all", "init_seeds",
         "set_seed", "seed_everything", "set_random_seed", "setup_seed"}
INT_DTYPES = {"long", "int", "int64", "int32", "int16", "int8", "uint8"}


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
        if _evaluation_data(call):
            continue
        yield (module, call.lineno, "sampler-without-set-epoch",
               "this DistributedSampler shuffles with seed + epoch, and "
               "nothing calls its set_epoch: every epoch draws the same "
               "order", "call `sampler.set_epoch(epoch)` at the top of "
               "each epoch, before iterating the loader")


# A dataset named for evaluation (eval_dataset, dataset_val, test_set):
# a metric averaged over it is the same in any order, so its sampler's
# epoch does not matter (DeepSpeed-Chat's eval sampler).
_EVAL_DATA = re.compile(
    r"(?:^|[_.])(?:val|valid|validation|eval|evaluation|test|dev)"
    r"(?:$|[_.\d])", re.I)


def _evaluation_data(call):
    data = _kw(call, "dataset") or (call.args[0] if call.args else None)
    return data is not None and bool(_EVAL_DATA.search(ast.unparse(data)))


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
    augments = _augmenting(program)
    calls = list(_seed_calls(program))
    for module, call, per_rank in calls:
        if (id(module) in augments and not per_rank
                and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, int)):
            yield (module, call.lineno, "same-seed-on-every-rank",
                   f"`{source_of(module, call)}` gives every rank the same "
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


_AUGMENT = re.compile(r"\bRandom[A-Z]|random_perspective|RandAugment|"
                      r"TrivialAugment|AutoAugment")


def _augmenting(program):
    """The files that augment at random, or import (at any depth) one of
    the files given that does: a seed set there feeds augmentation. A
    folder of unrelated scripts (accelerate's examples/) keeps a
    language model's seed apart from another script's crops."""
    stems = {id(m): m.path.replace("\\", "/").rsplit("/", 1)[-1]
             .removesuffix(".py") for m in program.modules}
    found = {id(m) for m in program.modules
             if _AUGMENT.search("\n".join(m.lines))}
    grew = True
    while grew:
        grew = False
        names = {stems[i] for i in found}
        for m in program.modules:
            parts = {p for v in m.imports.values() for p in v.split(".")}
            if id(m) not in found and parts & names:
                found.add(id(m))
                grew = True
    return found


def _path_of(scope, node):
    """The statement lists enclosing `node`: its innermost statement's."""
    best = ()
    for stmt in own_nodes(scope):
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
        sets = [c for c in own_nodes(scope) if isinstance(c, ast.Call)
                and last_name(c.func) == "set_device"]
        if not sets:
            continue
        first = min(sets, key=lambda c: c.lineno)
        path = _path_of(scope, first)
        for c in own_nodes(scope):
            # a use that runs on every path to set_device: its statement
            # list encloses set_device's (not a sibling branch)
            if (isinstance(c, ast.Call) and c.lineno < first.lineno
                    and _cuda_use(c)
                    and path[:len(_path_of(scope, c))] ==
                    _path_of(scope, c)):
                yield (scope.module, c.lineno, "cuda-before-set-device",
                       f"`{source_of(scope.module, c)}` runs before "
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
                   '"may use default device 0, causing issues like hang")',
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
    # map_location matters for what was saved from a GPU: a DDP job that
    # saves its own model's state_dict (chapter 8). A script that reads
    # another tool's file (a CPU-offloaded FSDP state, a converted
    # checkpoint) cannot be told from one that reads its own.
    gpu = gpu and program.has_ddp and any(
        dotted(c.func) == "torch.save" and any(
            isinstance(n, ast.Call) and last_name(n.func) == "state_dict"
            for n in ast.walk(c))
        for m in program.modules for c in _calls(m))
    strips = any(("module." in line and ("replace" in line or "[7:]" in line
                                        or "startswith" in line))
                 or "consume_prefix_in_state_dict_if_present" in line
                 for m in program.modules for line in m.lines)
    for scope in program.scopes.values():
        wrapped = _ddp_names(scope)
        for node in own_nodes(scope):
            if not isinstance(node, ast.Call):
                continue
            if gpu:
                yield from _load_without_map(scope, node)
            if wrapped and not strips:
                yield from _save_wrapper(scope, node, wrapped)
            if wrapped:
                yield from _load_on_some(program, scope, node, wrapped)


_CHECKPOINT = re.compile(r"ckpt|checkpoint|state|weight|model|resume|"
                         r"pretrain|snapshot", re.I)


def _is_checkpoint(scope, load):
    """Whether a torch.load reads a checkpoint: its result goes into a
    load_state_dict, or into a name that says so (`ckpt`, `state`,
    `weights`). A cache of labels (YOLOv7's) holds no CUDA tensors."""
    names = set()
    for node in own_nodes(scope):
        if isinstance(node, ast.Assign) and any(
                n is load for n in ast.walk(node.value)):
            names |= {ast.unparse(t) for t in node.targets}
    if any(_CHECKPOINT.search(n) for n in names):
        return True
    for node in own_nodes(scope):
        if isinstance(node, ast.Call) and \
                last_name(node.func) == "load_state_dict":
            inner = list(ast.walk(node))
            if any(n is load for n in inner) or any(
                    isinstance(n, ast.Name) and n.id in names
                    for n in inner):
                return True
    return False


def _load_without_map(scope, node):
    if (dotted(node.func) == "torch.load"
            and _kw(node, "map_location") is None
            and len(node.args) < 2 and not _maps_elsewhere(scope)
            and _is_checkpoint(scope, node)):
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
        guard = rank_guard(program, scope, node)
        if guard is not None:
            yield (scope.module, node.lineno, "load-on-some-ranks-after-ddp",
                   f"weights loaded under `{source_of(scope.module, guard)}` "
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
               for n in own_nodes(scope))


def reductions(program):
    """int-divide-after-all-reduce and reduce-read-off-dst."""
    for scope in program.scopes.values():
        ints = _int_tensors(scope)
        reduced = {}        # tensor -> (op, line, dst)
        for node in sorted((n for n in own_nodes(scope)
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
        guard = rank_guard(program, scope, node)
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
