"""A clean DDP script, written anew for ddpdemo's tests (no line
copied), shaped like pytorch/examples' distributed/ddp/example.py at
commit 77f55b912142e11fcfdf5b530231fb9c52f181e8: torchrun sets the
environment, each process picks its devices from its local rank and
world size, and trains a toy model for a few steps.

    torchrun --nproc-per-node 2 clean_ddp_example.py

The check must give no finding.
"""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def demo(local_rank, local_world_size):
    per_rank = torch.cuda.device_count() // local_world_size
    devices = list(range(local_rank * per_rank,
                         (local_rank + 1) * per_rank))
    model = torch.nn.Sequential(torch.nn.Linear(10, 10),
                                torch.nn.ReLU(),
                                torch.nn.Linear(10, 5)).cuda(devices[0])
    ddp_model = DDP(model, device_ids=devices)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=1e-3)
    for _ in range(3):
        optimizer.zero_grad()
        out = ddp_model(torch.randn(20, 10))
        torch.nn.functional.mse_loss(
            out, torch.randn(20, 5).to(devices[0])).backward()
        optimizer.step()


if __name__ == "__main__":
    dist.init_process_group(backend="nccl")
    demo(int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"]))
    dist.destroy_process_group()
