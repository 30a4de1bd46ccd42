"""The %%ranks cell magic in a real IPython shell: output grouped and
prefixed by rank, a final expression shown, hangs bounded and reported."""
import time

import pytest
from IPython.testing.globalipapp import get_ipython

import ddpdemo


@pytest.fixture(scope="module")
def shell_and_cluster():
    shell = get_ipython()
    with ddpdemo.Cluster(world_size=2, backend="gloo", timeout=20) as c:
        yield shell, c


def test_cell_runs_on_every_rank_in_rank_order(shell_and_cluster, capsys):
    shell, _ = shell_and_cluster
    shell.run_cell_magic("ranks", "", "print('hi', rank)\nrank * 10")
    assert capsys.readouterr().out.splitlines() == [
        "[rank 0] hi 0", "[rank 1] hi 1", "[rank 0] 0", "[rank 1] 10"]


def test_variables_persist_and_collectives_work(shell_and_cluster, capsys):
    shell, _ = shell_and_cluster
    shell.run_cell_magic("ranks", "", "t = torch.arange(2) + 1 + 2 * rank")
    shell.run_cell_magic("ranks", "", "dist.all_reduce(t)\nt.tolist()")
    assert capsys.readouterr().out.splitlines() == [
        "[rank 0] [4, 6]", "[rank 1] [4, 6]"]


def test_hang_in_a_cell_is_bounded_and_names_the_line(shell_and_cluster):
    shell, cluster = shell_and_cluster
    start = time.monotonic()
    with pytest.raises(ddpdemo.HangError) as info:
        shell.run_cell_magic("ranks", "--timeout 2",
                             "if rank == 0:\n    dist.barrier()")
    # The cell's own --timeout, not the cluster's (20 s), bounded it.
    assert 2 <= time.monotonic() - start < cluster.timeout
    assert info.value.ranks == [0]
    assert '"<%%ranks cell>", line 2' in str(info.value)
    assert "dist.barrier()" in str(info.value)
    shell.run_cell_magic("ranks", "", "x = 1")   # recovered


def test_error_in_a_cell_names_the_rank(shell_and_cluster):
    shell, _ = shell_and_cluster
    with pytest.raises(ddpdemo.RankError) as info:
        shell.run_cell_magic("ranks", "", "1 / (rank - 1)")
    assert list(info.value.errors) == [1]
    assert "ZeroDivisionError" in info.value.errors[1]


def test_px_magics_are_registered(shell_and_cluster):
    shell, _ = shell_and_cluster
    assert "px" in shell.magics_manager.magics["cell"]
    assert "ranks" in shell.magics_manager.magics["cell"]


def test_stopping_a_second_cluster_hands_the_magic_back(shell_and_cluster,
                                                        capsys):
    shell, _ = shell_and_cluster
    with ddpdemo.Cluster(world_size=1, backend="gloo") as second:
        shell.run_cell_magic("ranks", "", "world_size")
        assert capsys.readouterr().out.splitlines() == ["[rank 0] 1"]
    assert second.state == "stopped"
    shell.run_cell_magic("ranks", "", "world_size")
    assert capsys.readouterr().out.splitlines() == [
        "[rank 0] 2", "[rank 1] 2"]


@pytest.mark.parametrize("line", ["--bogus", "--timeout abc"])
def test_bad_options_are_a_usage_error_not_an_exit(shell_and_cluster, line):
    from IPython.core.error import UsageError
    shell, _ = shell_and_cluster
    with pytest.raises(UsageError):
        shell.run_cell_magic("ranks", line, "x = 1")
