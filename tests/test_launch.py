"""ddpdemo.launch, what torchrun scripts use: LOCAL_RANK from either
launcher's convention, and a group whose output comes in rank order."""
import textwrap

import pytest

from ddpdemo import launch


@pytest.mark.parametrize("argv, env, expected", [
    (["--local-rank=3"], {}, 3),
    (["--local_rank", "2", "--other"], {}, 2),
    ([], {"LOCAL_RANK": "1"}, 1),
    ([], {}, 0),
])
def test_local_rank_from_argument_or_environment(argv, env, expected,
                                                 monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert launch.local_rank(argv) == expected


SCRIPT = """
import os
from ddpdemo import launch
rank, world_size, device = launch.init()
launch.print_ranked(f"rank {rank} of {world_size} on {device}",
                    f"gloo on {os.environ['GLOO_SOCKET_IFNAME']}")
launch.finish()
"""


def test_init_and_print_ranked_under_torchrun(tmp_path, torchrun):
    from ddpdemo.runtime.devices import loopback_interface
    script = tmp_path / "hello.py"
    script.write_text(textwrap.dedent(SCRIPT))
    done = torchrun(str(script))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        f"[rank {r}] {line}" for r in range(2)
        for line in (f"rank {r} of 2 on cpu",
                     f"gloo on {loopback_interface()}")]


def test_reason_is_torchs_message_without_gloos_source_location():
    from ddpdemo.launch import reason
    error = RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc"
                         ":534] Timed out waiting 5000ms for recv "
                         "operation to complete\nException raised from ...")
    assert reason(error) == ("Timed out waiting 5000ms for recv operation "
                             "to complete")
    assert reason(RuntimeError("no location")) == "no location"
