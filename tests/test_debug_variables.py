"""ddpdemo.debug_variables: every row's evidence is in the installed
torch, a changed default or a lost name fails, and the table has one row
per variable (the Reference page "Debugging variables")."""
import dataclasses

import pytest
import torch.distributed as dist

from ddpdemo.debug_variables import (VARIABLES, evidence, in_library,
                                     one_rank_group, table)
from ddpdemo.runtime.devices import loopback_interface


def test_every_variable_is_backed_by_the_installed_torch(capsys):
    for variable in VARIABLES:
        evidence(variable)
    out = capsys.readouterr().out
    assert "FlightRecorder.hpp:" in out and "2000);" in out


def test_a_default_the_cited_lines_do_not_hold_fails():
    fr = next(v for v in VARIABLES if v.name.startswith("TORCH_FR_BUFFER"))
    with pytest.raises(LookupError, match="default '4000' is gone"):
        evidence(dataclasses.replace(fr, default_in="4000"))


def test_a_name_the_library_lacks_fails():
    assert not in_library("torch/lib/libtorch_cpu.so", "DDPDEMO_NO_SUCH")
    gloo = next(v for v in VARIABLES if v.name == "GLOO_SOCKET_IFNAME")
    with pytest.raises(LookupError, match="no longer names"):
        evidence(dataclasses.replace(gloo, name="DDPDEMO_NO_SUCH"))


def test_the_table_has_a_row_per_variable_and_marks_nccls_own():
    rows = table(VARIABLES).splitlines()
    assert len(rows) == 2 + len(VARIABLES)
    assert sum("(NCCL's)" in row for row in rows) == 2


def test_one_rank_group_sets_and_restores_the_debug_level():
    with one_rank_group(TORCH_DISTRIBUTED_DEBUG="DETAIL",
                        GLOO_SOCKET_IFNAME=loopback_interface()):
        assert dist.get_debug_level() == dist.DebugLevel.DETAIL
        assert dist.get_world_size() == 1
    assert not dist.is_initialized()
    assert dist.get_debug_level() == dist.DebugLevel.OFF


def test_the_dump_file_variable_is_a_prefix_with_the_rank_appended(capsys):
    # Issue 44 item 8: TORCH_FR_DUMP_TEMP_FILE names no file: the writer
    # appends the rank to it (FlightRecorder.hpp's DebugInfoWriter).
    temp = next(v for v in VARIABLES
                if v.name.startswith("TORCH_FR_DUMP_TEMP_FILE"))
    assert "a prefix" in temp.what and "`/tmp/fr/rank_0`" in temp.what
    evidence(temp)
    out = capsys.readouterr().out
    assert "filename_ = c10::str(namePrefix, rank);" in out
    assert "names TORCH_FR_DUMP_TEMP_FILE" in out
