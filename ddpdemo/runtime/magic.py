"""The `%%ranks` cell magic: run a cell on every rank, bounded, with output
grouped and ordered by rank. Chapter 0.

Plain `%%px` streams output in arrival order and blocks forever on a
deadlock; `%%ranks` has the same guarantees as `Cluster.run`:

    %%ranks --timeout 5
    t = torch.arange(2) + 1 + 2 * rank
    dist.all_reduce(t)
    t
"""
import hashlib
import linecache

from IPython.core.magic_arguments import (argument, magic_arguments,
                                          parse_argstring)

# Running clusters, oldest first: the magic talks to the last one started
# that is still running, so stopping a second cluster hands it back.
_active = []


def register(cluster):
    """Point `%%ranks` at this cluster (inside IPython only)."""
    from IPython import get_ipython
    shell = get_ipython()
    if shell is None:
        return
    if cluster in _active:
        _active.remove(cluster)
    _active.append(cluster)
    shell.register_magic_function(ranks, "cell", "ranks")


def unregister(cluster):
    if cluster in _active:
        _active.remove(cluster)


@magic_arguments()
@argument("--timeout", type=float, default=None,
          help="seconds to wait for every rank (default: the cluster's)")
def ranks(line, cell):
    """Run this cell on every rank, bounded, output grouped by rank."""
    __tracebackhide__ = True  # IPython: show the error, not this frame
    # A bad option raises UsageError, which IPython shows as one line,
    # instead of argparse's SystemExit.
    args = parse_argstring(ranks, line)
    if not _active:
        raise RuntimeError("no cluster is running: start one with "
                           "ddpdemo.Cluster(...) first")
    digest = hashlib.sha1(cell.encode()).hexdigest()[:12]
    filename = f"<ranks {digest}>"
    # Registered so a hang report can quote the cell's stuck line.
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True),
                                 filename)
    values = _active[-1].run_cell(cell, filename, timeout=args.timeout)
    for rank, value in enumerate(values):
        if value is not None:
            for text in value.splitlines():
                print(f"[rank {rank}] {text}")


def in_ipython():
    """True inside IPython (a notebook kernel): only there are ipyparallel's
    `%px` magics activated on the ranks."""
    try:
        from IPython import get_ipython
        return get_ipython() is not None
    except ImportError:
        return False
