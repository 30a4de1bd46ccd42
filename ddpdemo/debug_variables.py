"""The environment variables people set when a distributed job hangs or
crashes, in one table, each with the installed torch's evidence. The
Reference page "Debugging variables" (book/debug_variables.ipynb) shows it.

Each Variable says where the installed torch backs what the table says:
lines to `cite` (re-found at every run), one of which must hold the
default as written there (`default_in`); or, where the wheel ships no
source for it, the compiled library whose strings name it (`library`),
searched again too. A default nothing installed states is shown as such.

    for variable in VARIABLES:
        evidence(variable)          # prints the lines; fails if gone
    table(VARIABLES)                # the Markdown table
"""
import contextlib
import dataclasses
import datetime
import mmap
import os
import tempfile

from . import quote

NCCL_HPP = "torch/include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp"
NOT_SHIPPED = "not in the installed sources"


@dataclasses.dataclass(frozen=True)
class Variable:
    name: str
    what: str
    default: str
    cite: tuple = ()          # ((path, *texts), ...) for ddpdemo.cite
    default_in: str = None    # text of the cited line that holds it
    library: str = None       # a compiled library that names `name`
    owner: str = "torch"      # "NCCL": the NCCL library's own variable
    book: str = ""            # "live: <where>" or "quoted: <where>"


VARIABLES = [
    Variable(
        "TORCH_DISTRIBUTED_DEBUG",
        "`OFF`, `INFO` or `DETAIL`. `DETAIL` wraps each gloo or NCCL group "
        "in a checker that verifies every collective across the ranks "
        "(over a gloo group) before running it",
        "`OFF` (asserted below)",
        cite=(("torch/include/torch/csrc/distributed/c10d/debug.h",
               "enum class DebugLevel { Off = 0, Info = 1, Detail = 2 };"),
              ("torch/include/torch/csrc/distributed/c10d/"
               "ProcessGroupWrapper.hpp",
               "// collective operations to verify consistency across ranks"),
              ("torch/distributed/distributed_c10d.py",
               "# In debug mode and if GLOO is available, wrap in a wrapper",
               "if get_debug_level() == DebugLevel.DETAIL:",
               "backend_class = _create_process_group_wrapper(")),
        book="**live**: below; {ref}`debug-detail`"),
    Variable(
        "TORCH_FR_BUFFER_SIZE (or TORCH_NCCL_TRACE_BUFFER_SIZE)",
        "entries in the Flight Recorder's ring buffer of collectives; "
        "0 turns it off",
        "2000",
        cite=(("torch/include/torch/csrc/distributed/c10d/FlightRecorder.hpp",
               '{"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}, '
               '2000);', "enabled_ = max_entries_ > 0;"),),
        default_in="2000",
        book="**live**: every cluster's ledger ("
             "{doc}`evaluation`, {doc}`when_ddp_hangs`)"),
    Variable(
        "TORCH_NCCL_DUMP_ON_TIMEOUT",
        "NCCL: write the Flight Recorder's buffer out when the watchdog "
        "times out; needs `TORCH_NCCL_ENABLE_MONITORING=1` and a buffer "
        "size above 0",
        NOT_SHIPPED,
        cite=((NCCL_HPP, "// Control whether dumping debug info on watchdog",
              "// TORCH_NCCL_ENABLE_MONITORING=1 and "
              "TORCH_NCCL_TRACE_BUFFER_SIZE > 0.",
              '"TORCH_NCCL_DUMP_ON_TIMEOUT"};'),),
        book="quoted: here; set in {doc}`triage`'s step 0"),
    Variable(
        "TORCH_FR_DUMP_TEMP_FILE (or TORCH_NCCL_DEBUG_INFO_TEMP_FILE)",
        "where that dump goes: a prefix, to which each rank's number is "
        "appended (`/tmp/fr/rank_` writes `/tmp/fr/rank_0`, "
        "`/tmp/fr/rank_1`, ...)",
        NOT_SHIPPED,
        cite=(("torch/include/torch/csrc/distributed/c10d/FlightRecorder.hpp",
               "// Write NCCL debug info to local disk",
               "const std::string& namePrefix,",
               "filename_ = c10::str(namePrefix, rank);"),),
        library="torch/lib/libtorch_cpu.so"),
    Variable(
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "NCCL: what happens to the process when a collective fails or "
        "times out: 0 nothing, 1 tear it down, 2 abort the communicators "
        "only, 3 tear it down without cleaning up; torchrun sets 1 for "
        "its ranks unless set",
        "3 (under torchrun 1)",
        cite=((NCCL_HPP, "// the default value (3 - SkipCleanUp).",
               '"TORCH_NCCL_ASYNC_ERROR_HANDLING",', "NoHandling = 0,",
               "TearDown = 1,", "CleanUpOnly = 2,", "SkipCleanUp = 3"),
              ("torch/distributed/elastic/agent/server/"
               "local_elastic_agent.py",
               '"TORCH_NCCL_ASYNC_ERROR_HANDLING": os.getenv(',
               '"TORCH_NCCL_ASYNC_ERROR_HANDLING", str(1)')),
        default_in="(3 - SkipCleanUp)"),
    Variable(
        "TORCH_NCCL_BLOCKING_WAIT",
        "NCCL: `wait()` blocks the host until the collective completes, "
        "up to the group's timeout, instead of only ordering the CUDA "
        "stream",
        "`false`",
        cite=(("torch/distributed/distributed_c10d.py",
               "When TORCH_NCCL_BLOCKING_WAIT is set, the process will block"),
              (NCCL_HPP, "// Control whether or not wait() is blocking or",
               "// Whether or not wait() and synchronize() are blocking",
               "bool blockingWait_ = false;")),
        default_in="= false",
        book="quoted: {doc}`all_reduce`"),
    Variable(
        "TORCH_NCCL_DESYNC_DEBUG",
        "NCCL: turns on Desync Debug (the header says no more); to be set "
        "together with `TORCH_NCCL_ASYNC_ERROR_HANDLING`",
        NOT_SHIPPED,
        cite=((NCCL_HPP, "// Control whether Desync Debug is enabled.",
              "// together with TORCH_NCCL_ASYNC_ERROR_HANDLING."),)),
    Variable(
        "TORCH_CPP_LOG_LEVEL",
        "the level of torch's C++ log lines (c10's logging) that reach "
        "stderr; the book sets `FATAL` to keep them out of its outputs",
        NOT_SHIPPED, library="torch/lib/libc10.so",
        book="**live**: {doc}`evaluation`, "
             "{doc}`inside_ddp`, {doc}`when_ddp_hangs`"),
    Variable(
        "GLOO_SOCKET_IFNAME",
        "the network interface gloo's connections use; a name the host "
        "does not have fails at `init_process_group` (asserted below)",
        "unset", library="torch/lib/libtorch_cpu.so",
        book="**live**: below; every cluster (loopback; the hosts' link "
             "in `tests/test_multihost.py`)"),
    Variable(
        "NCCL_DEBUG",
        "NCCL's own logging; read by the NCCL library, not by torch",
        "NCCL's (no NCCL here)", owner="NCCL",
        cite=(("torch/nn/parallel/distributed.py",
              "def _dump_DDP_relevant_env_vars():", '"NCCL_DEBUG",'),)),
    Variable(
        "NCCL_SOCKET_IFNAME",
        "the interface NCCL's sockets use; read by the NCCL library",
        "NCCL's (no NCCL here)", owner="NCCL",
        cite=(("torch/nn/parallel/distributed.py",
              "def _dump_DDP_relevant_env_vars():",
              '"NCCL_SOCKET_IFNAME",'),)),
]


def in_library(path, text):
    """Whether the installed file `path` (a compiled library) holds
    `text` among its bytes; searched without reading it into memory."""
    with open(os.path.join(quote._ROOT, path), "rb") as f, \
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data.find(text.encode() + b"\0") >= 0


def names(variable):
    """The variable's names: `A (or B)` gives both."""
    return variable.name.replace(" (or ", " ").rstrip(")").split()


def evidence(variable):
    """Print what the installed torch says of `variable`; raise
    LookupError if it no longer says it (a line gone, a default that
    changed, a name the library lost)."""
    lines = []
    for path, *texts in variable.cite:
        for number, line in quote.find(path, *texts):
            print(f"{path}:{number}: {line}")
            lines.append(line)
    if variable.default_in is not None and \
            not any(variable.default_in in line for line in lines):
        raise LookupError(f"{variable.name}: the default "
                          f"{variable.default_in!r} is gone")
    if variable.library:
        for name in names(variable):
            if not in_library(variable.library, name):
                raise LookupError(f"{variable.library} no longer names "
                                  f"{name}")
        print(f"{variable.library}: names", " and ".join(names(variable)))


def table(variables):
    """The variables as one Markdown table."""
    rows = ["| variable | what it does | default | in the book |",
            "|---|---|---|---|"]
    for v in variables:
        name = " or ".join(f"`{n}`" for n in names(v))
        if v.owner != "torch":
            name += f" ({v.owner}'s)"
        rows.append(f"| {name} | {v.what} | {v.default} | "
                    f"{v.book or '-'} |")
    return "\n".join(rows)


@contextlib.contextmanager
def one_rank_group(**env):
    """A gloo group of one rank in this process, formed with `env` in
    the environment (torch reads TORCH_DISTRIBUTED_DEBUG again first);
    destroyed, and the environment restored, on leaving. Bounded."""
    import torch.distributed as dist
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    dist.set_debug_level_from_env()
    try:
        with tempfile.TemporaryDirectory(prefix="ddpdemo-debug-") as tmp:
            store = dist.FileStore(os.path.join(tmp, "store"), 1)
            dist.init_process_group("gloo", store=store, rank=0,
                                    world_size=1,
                                    timeout=datetime.timedelta(seconds=10))
            try:
                yield
            finally:
                dist.destroy_process_group()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        dist.set_debug_level_from_env()
