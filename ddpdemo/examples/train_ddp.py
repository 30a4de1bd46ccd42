"""A complete DDP training script, the one to take to GPUs ("Launching a
real job", book/launching). On one machine, one process per GPU (or
two on the CPU):

    torchrun --standalone --nproc-per-node 2 -m ddpdemo.examples.train_ddp

Without torchrun it is one process, a group of one:

    python -m ddpdemo.examples.train_ddp

On two nodes, the checkpoint on storage that both nodes see:

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \
        --rdzv-endpoint HOST:29400 -m ddpdemo.examples.train_ddp \
        --checkpoint /shared/train_ddp.pt

NCCL when every local rank has a GPU of its own (rank r of a node on
cuda:LOCAL_RANK); gloo on the CPU when no GPU is visible, so the same file
runs in the tests; it refuses to start with some GPUs but fewer than
ranks per node. The data set is made in code, the same on every rank; each rank
trains on its share (DistributedSampler, reshuffled every epoch by
set_epoch); rank 0 saves a checkpoint, the others wait at a barrier, then
every rank loads it with map_location onto its own device. Progress and
each rank's lines are printed by rank 0 alone, in rank order.
`--validate S` has rank 0 work alone for S seconds before saving while
the others wait at the barrier; `--timeout S` sets the group's timeout
(the book runs both to show a timeout shorter than that wait).
"""
import argparse
import datetime
import os
import tempfile
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from ddpdemo.runtime.devices import auto_backend

# Bounds every collective. Hours, not seconds: while rank 0 saves or
# validates, the others wait at a barrier, and a wait past the timeout
# ends the job (the book shows it on gloo). YOLOv5's train.py uses 3 hours.
TIMEOUT = datetime.timedelta(seconds=10800)


def backend_for(gpus, local_world_size):
    """"nccl" when each rank of this node can have a GPU of its own,
    "gloo" (on the CPU) when there is none (ddpdemo's "auto"); otherwise
    an error, rather than training on the CPU by surprise."""
    backend = auto_backend((gpus, r) for r in range(local_world_size))
    if backend == "nccl" or gpus == 0:
        return backend
    raise SystemExit(f"{gpus} GPUs visible for {local_world_size} ranks on "
                     "this node: start one rank per GPU (--nproc-per-node "
                     f"{gpus}), or hide them all (CUDA_VISIBLE_DEVICES=) "
                     "to train on the CPU")


def setup(timeout=TIMEOUT):
    """Join the group torchrun describes, or without torchrun a group of
    one (no port: an in-memory store); returns (local_rank, device)."""
    alone = "RANK" not in os.environ              # not started by torchrun
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    backend = backend_for(torch.cuda.device_count(),
                          int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
    kwargs = dict(timeout=timeout)
    if alone:
        kwargs.update(store=dist.HashStore(), rank=0, world_size=1)
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", local_rank)   # one GPU per local rank
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(backend, **kwargs)
    return local_rank, device


def make_data(n=64, seed=0):
    """y = x @ w + noise, the same on every rank (one seed): (n, 8), (n, 1)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    w = torch.randn(8, 1, generator=g)            # drawn before the noise
    y = x @ w + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def make_model():
    torch.manual_seed(0)       # DDP broadcasts rank 0's weights anyway
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 1))


def say(*lines):
    """Every rank's lines, printed by rank 0 in rank order. Collective."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, [str(line) for line in lines])
    if dist.get_rank() == 0:
        for rank, rank_lines in enumerate(gathered):
            for line in rank_lines:
                print(f"[rank {rank}] {line}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--checkpoint", default=os.path.join(
        tempfile.gettempdir(), "train_ddp.pt"))
    parser.add_argument("--timeout", type=float,
                        default=TIMEOUT.total_seconds())
    parser.add_argument("--validate", type=float, default=0.0)
    args = parser.parse_args()
    local_rank, device = setup(datetime.timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    master = rank == 0                    # prints progress, saves

    data = make_data()
    sampler = DistributedSampler(data, shuffle=True, seed=0)  # rank's share
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = make_model().to(device)
    ddp_model = DDP(model, device_ids=[local_rank] if device.type == "cuda"
                    else None)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.05)
    lines = [f"RANK={rank} LOCAL_RANK={local_rank} "
             f"WORLD_SIZE={dist.get_world_size()} on {device} "
             f"({dist.get_backend()})"]
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)          # else every epoch has one order
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.mse_loss(ddp_model(x), y)
            optimizer.zero_grad()
            loss.backward()               # gradients all-reduced here
            optimizer.step()
            total += loss.item()
        mean = torch.tensor([total / len(loader)], device=device)
        dist.all_reduce(mean)             # every rank's mean loss, summed
        if master:
            print(f"epoch {epoch}: mean loss over ranks "
                  f"{mean.item() / dist.get_world_size():.3f}", flush=True)
        lines.append(f"epoch {epoch}: samples {list(sampler)[:4]}..., "
                     f"mean loss {total / len(loader):.3f}")

    if master:                            # one writer, on shared storage
        if args.validate:
            print(f"rank 0 validates alone for {args.validate:g} s",
                  flush=True)
            time.sleep(args.validate)     # the others wait at the barrier
        torch.save({"model": model.state_dict(), "epoch": args.epochs},
                   args.checkpoint)
    dist.barrier()                        # nobody reads before it is written
    loaded = torch.load(args.checkpoint, map_location=device)
    same = all(torch.equal(loaded["model"][k], v)
               for k, v in model.state_dict().items())
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, flat.cpu())
    lines += [f"loaded checkpoint equals the trained weights: {same}",
              "parameters equal on every rank: "
              f"{all(torch.equal(everyone[0], f) for f in everyone)}"]
    say(*lines)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
