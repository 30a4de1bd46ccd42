"""Where a group's ranks meet: one small object per way, with one
interface, made once in the kernel and handed to every rank (group,
engine) and to the Flight Recorder's side threads (flight). Chapter 0,
"How the live cluster works"; README, "Past one machine".

    FileRendezvous(path)        a FileStore in the cluster's private
                                directory: every rank on this machine,
                                no listener at all
    TCPRendezvous(host, port)   rank 0's TCPStore, opened on port 0
                                (engine.open_tcp_store makes it)

    store(timeout_s, world_size=None)   a new client of the store
    gloo_interface()   the interface gloo must use to reach rank 0, or
                       None where the launch pinned it already (local)

RANK SIDE: the standard library and ddpdemo.runtime.devices at import;
torch when a store is opened.
"""
import dataclasses
import datetime

from .devices import gloo_interface


@dataclasses.dataclass(frozen=True)
class FileRendezvous:
    """A FileStore at `path` (local clusters)."""
    path: str

    def store(self, timeout_s, world_size=None):
        """A client of the store; world_size None (a side thread, the
        notebook): -1 users, so this client never deletes the file."""
        import torch.distributed as dist
        store = dist.FileStore(self.path,
                               -1 if world_size is None else world_size)
        store.set_timeout(datetime.timedelta(seconds=timeout_s))
        return store

    def gloo_interface(self):
        return None     # local engines were launched with loopback pinned


@dataclasses.dataclass(frozen=True)
class TCPRendezvous:
    """Rank 0's TCPStore at `host`:`port` (ranks on other hosts)."""
    host: str
    port: int

    def store(self, timeout_s, world_size=None):
        """A client (not the master) of rank 0's store."""
        import torch.distributed as dist
        return dist.TCPStore(self.host, self.port, world_size,
                             is_master=False,
                             timeout=datetime.timedelta(seconds=timeout_s))

    def gloo_interface(self):
        """Across hosts: the interface this host reaches rank 0 through."""
        return gloo_interface(self.host)
