"""A clean DDP script, written anew for ddpdemo's tests (no line
copied), shaped like pytorch/examples' DDP tutorial series
(distributed/ddp-tutorial-series/multigpu.py, multigpu_torchrun.py,
multinode.py) and distributed/minGPT-ddp at commit
77f55b912142e11fcfdf5b530231fb9c52f181e8: a trainer class that wraps
its model in DDP, a DistributedSampler with set_epoch, a snapshot
loaded with map_location and saved by rank 0 from the unwrapped module.

    torchrun --nproc-per-node 2 clean_spawn_trainer.py   (or mp.spawn)

The check must give no finding (a new one is a false alarm).
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, loader, optimizer, snapshot):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.model = model.to(self.local_rank)
        self.loader = loader
        self.optimizer = optimizer
        self.snapshot = snapshot
        self.epochs_run = 0
        if os.path.exists(snapshot):
            state = torch.load(snapshot,
                               map_location=f"cuda:{self.local_rank}")
            self.model.load_state_dict(state["model"])
            self.epochs_run = state["epochs_run"]
        self.model = DDP(self.model, device_ids=[self.local_rank])

    def _step(self, source, target):
        self.optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(source), target)
        loss.backward()
        self.optimizer.step()

    def _save(self, epoch):
        state = {"model": self.model.module.state_dict(),
                 "epochs_run": epoch}
        torch.save(state, self.snapshot)

    def train(self, epochs, every):
        for epoch in range(self.epochs_run, epochs):
            self.loader.sampler.set_epoch(epoch)
            for source, target in self.loader:
                self._step(source.to(self.local_rank),
                           target.to(self.local_rank))
            if self.global_rank == 0 and epoch % every == 0:
                self._save(epoch)


def worker(rank, world_size, epochs):
    os.environ.setdefault("LOCAL_RANK", str(rank))
    os.environ.setdefault("RANK", str(rank))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    data = TensorDataset(torch.rand(256, 16), torch.rand(256, 1))
    loader = DataLoader(data, batch_size=32, shuffle=False,
                        sampler=DistributedSampler(data))
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    Trainer(model, loader, optimizer, "snapshot.pt").train(epochs, 5)
    dist.destroy_process_group()


if __name__ == "__main__":
    n = torch.cuda.device_count()
    mp.spawn(worker, args=(n, int(sys.argv[1])), nprocs=n)
