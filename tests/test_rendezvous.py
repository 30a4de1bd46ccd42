"""ddpdemo.runtime.rendezvous: the two ways a group's ranks meet, one
interface: a client store of each reaches what another client wrote,
and each says which interface gloo must use."""
import pickle

import pytest

from ddpdemo.runtime import devices, engine
from ddpdemo.runtime.rendezvous import FileRendezvous, TCPRendezvous

pytestmark = pytest.mark.fast


def test_a_file_rendezvous_is_one_file_every_client_shares(tmp_path):
    here = FileRendezvous(str(tmp_path / "store"))
    writer, reader = here.store(10.0, world_size=2), here.store(10.0)
    writer.set("k", b"v")
    assert reader.get("k") == b"v"
    assert here.gloo_interface() is None    # the launch pinned loopback


def test_rank_0s_tcp_store_is_reached_through_its_rendezvous():
    met = engine.open_tcp_store(1, "127.0.0.1", 10.0)
    try:
        assert isinstance(met, TCPRendezvous) and met.host == "127.0.0.1"
        assert met.port > 0                  # port 0: the OS picked it
        met.store(10.0).set("k", b"v")
        assert met.store(10.0).get("k") == b"v"
        assert met.gloo_interface() == devices.loopback_interface()
    finally:
        engine._keep.pop("store", None)


def test_a_rendezvous_travels_to_the_ranks_and_compares_by_value():
    # ipyparallel pickles it to every rank; Formed compares it.
    here = FileRendezvous("/tmp/s")
    assert pickle.loads(pickle.dumps(here)) == here
    assert TCPRendezvous("10.0.0.1", 4321) != TCPRendezvous("10.0.0.1", 1)
