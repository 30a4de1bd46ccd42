"""Quiet progress output and torch's default CPU kernels for every test
and every notebook kernel nbval starts (kernels inherit this
environment), so stored outputs stay exact on any CPU.

And how one test run is split between pytest-xdist's three workers
(pyproject.toml's addopts: `-n 3 --dist loadfile --no-loadscope-reorder`;
`-n 0` runs everything in one process, in the same order).
Much of the suite waits: for a hang's timeout, for daemons, for a
browser; on two cores a third worker runs while the others wait (two
workers left a fifth of the CPU idle). What must stay in one
worker is a file: a notebook's cells share one kernel (nbval runs them in
order), and a module's tests share its module-scoped fixtures (a cluster,
a built site). The files that use something machine-wide (network
namespaces: MACHINE_WIDE) are one unit, run one after another in one
worker. Here, not in tests/conftest.py, so that `pytest book/x.ipynb`
is scheduled the same way.

(Not xdist's own `xdist_group` marker: pytest-xdist 3.8 groups by
renaming `item._nodeid`, which pytest 9 no longer reads, so with pytest
9.2 every marked test became a unit of its own.)
"""
import os

import pytest

os.environ["IPP_NONINTERACTIVE"] = "1"
# The book's outputs must hold on every reader's CPU: the notebooks'
# kernels and their ranks run torch's default (scalar) CPU kernels, which
# every CPU has, unless the variable is already set (ATEN_CPU_CAPABILITY=
# avx2 pytest book checks another). `python -m ddpdemo.book.execute`
# stores an output only if this machine's own kernels print it too.
os.environ.setdefault("ATEN_CPU_CAPABILITY", "default")

# Network namespaces, sshd, munge, slurmd and mpiexec on hosts a and b
# (tests/hosts.py): never two of these files at once.
MACHINE_WIDE = ("tests/test_multihost.py", "tests/test_slurm.py",
                "tests/test_mpi.py")
# The longest files go first: a worker takes each while the others run
# the rest (tests/test_site.py builds both editions and drives a browser
# through every page: about a fifth of the suite one after another;
# tests/test_explain.py's jobs hang and are read for about four minutes,
# and started last they set the suite's end).
FIRST = ("tests/test_site.py", "tests/test_explain.py")


def _file(nodeid):
    return nodeid.split("::", 1)[0]


def _rank(nodeid):
    """Where a file goes in the workers' queue: the longest units first,
    so that the run does not end on one worker with one long file left.
    The site test; the machine-wide unit (three scenarios of a few
    minutes each, one after another); the notebooks (each a kernel, a
    cluster and real gloo timeouts: every one longer than most test
    modules); then the test modules, in their order."""
    path = _file(nodeid)
    if path in FIRST:
        return 0
    if path in MACHINE_WIDE:
        return 1
    return 2 if path.endswith(".ipynb") else 3


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The longest units first (the workers take files in this order);
    sorted() is stable, so a file's tests keep their order."""
    items[:] = sorted(items, key=lambda i: _rank(i.nodeid))


def pytest_xdist_make_scheduler(config, log):
    """xdist's loadfile, with the MACHINE_WIDE files one unit."""
    from xdist.scheduler import LoadFileScheduling

    class Files(LoadFileScheduling):
        def _split_scope(self, nodeid):
            path = _file(nodeid)
            return "machine-wide" if path in MACHINE_WIDE else path

    return Files(config, log)
