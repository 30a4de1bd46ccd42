"""The book's running job, launch to shutdown (book/launching, where it
starts; book/checkpoint_resume, where it resumes). One process per GPU,
or two on the CPU; without torchrun, a group of one:

    torchrun --standalone --nproc-per-node 2 -m ddpdemo.examples.train_ddp
    python -m ddpdemo.examples.train_ddp

On two nodes, the checkpoint on storage both see; after a rank fails,
torchrun restarts every rank (each node's agent 3 times at most) and they
resume (the
variable gives each restart a fresh store: pytorch issue 135712):

    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nnodes 2 \
        --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \
        --max-restarts 3 -m ddpdemo.examples.train_ddp \
        --checkpoint /shared/train_ddp.pt

NCCL when every local rank has a GPU, gloo when none is visible. Each rank
trains on its share (DistributedSampler) and evaluates its share of the
held-out set, which rank 0 writes to a cache first (book/evaluation
breaks it); rank 0 logs, decides early stopping (--patience,
book/when_ddp_hangs) and saves every epoch. `--mix W` blends each batch with
three samples picked at random, one seed per rank (book/seeds).
`--validate S`: rank 0 works alone S s before its first save while the
others wait (with `--timeout S`, book/launching); `--die-at E:S`: rank 1
kills itself once, at epoch E, step S (tests/test_train_job).
"""
import argparse
import datetime
import os
import random
import signal
import tempfile
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import (DataLoader, DistributedSampler, Subset,
                              TensorDataset)

from ddpdemo.ordering import torch_distributed_zero_first_safe
from ddpdemo.runtime.devices import auto_backend

# Bounds every collective. Hours, not seconds: while rank 0 saves or
# validates, the others wait at a barrier, and a wait past the timeout
# ends the job (the book shows it on gloo). YOLOv5's train.py uses 3 hours.
TIMEOUT = datetime.timedelta(seconds=10800)
SEED = 0


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


def make_data(n=64, seed=SEED):
    """y = x @ w + noise, the same on every rank (one seed): (n, 8), (n, 1).
    Another seed draws other x and noise for the same w: a held-out set."""
    w = torch.randn(8, 1, generator=torch.Generator().manual_seed(SEED))
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n, 8, generator=g)
    return TensorDataset(x, x @ w + 0.1 * torch.randn(n, 1, generator=g))


def held_out(path, n, rank):
    """The held-out set, from a cache that rank 0 writes while the other
    ranks wait (book/rank_zero_first), as a download would be; `rank` -1
    when not distributed. The cache sits beside the checkpoint, on
    storage every node sees, so the global rank decides (one writer; by
    LOCAL_RANK each node's rank 0 would write the same file). Every rank
    must call it: rank 0 alone would wait for the others (book/
    evaluation)."""
    with torch_distributed_zero_first_safe(rank):
        if not os.path.exists(path):   # rank 0; any rank that lacks it
            tmp = f"{path}.{os.getpid()}.tmp"
            torch.save(make_data(n, seed=1).tensors, tmp)
            os.replace(tmp, path)              # never read half-written
        return TensorDataset(*torch.load(path))


def seed_rank(rank):
    """One seed per rank for the rank's own draws, dropout masks (torch)
    and augmentation picks (random): with one seed everywhere every rank
    would pick the same samples (book/seeds). The sampler keeps its own
    shared seed."""
    torch.manual_seed(SEED + 1 + rank)
    random.seed(SEED + 1 + rank)


def mix_extras(x, pool, weight):
    """Mosaic's idea on this data: blend the batch with three samples of
    `pool` picked at random. Returns the batch and the picks."""
    picks = random.sample(range(len(pool)), 3)
    extras = pool.tensors[0][picks].mean(0)
    return (1 - weight) * x + weight * extras, picks


def make_model():
    torch.manual_seed(SEED)    # DDP broadcasts rank 0's weights anyway
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                               torch.nn.Dropout(0.1), torch.nn.Linear(16, 1))


def own_share(data, rank, world_size):
    """This rank's part of the held-out set, each sample on one rank only.
    DistributedSampler pads the index list to a multiple of world_size
    by repeating its start; position p of that list is a repeat when p >=
    len(data), and rank r holds positions r, r + world_size, ..."""
    sampler = DistributedSampler(data, world_size, rank, shuffle=False)
    return Subset(data, [i for k, i in enumerate(sampler)
                         if rank + k * world_size < len(data)])


def evaluate(model, share, device):
    """Mean squared error over the whole held-out set, on every rank
    (collective): each rank sums over its share, then [sum, count] is
    all-reduced, so no sample counts twice and no rank waits alone."""
    model.eval()                  # no dropout; the weights are the same
    total = torch.zeros(2, dtype=torch.float64, device=device)  # sum, count
    with torch.no_grad():
        for x, y in DataLoader(share, batch_size=8):
            err = (model(x.to(device)) - y.to(device)).pow(2)
            total += torch.stack([err.sum().double(),
                                  torch.tensor(len(y), device=device)])
    model.train()
    dist.all_reduce(total)
    return total[0].item() / total[1].item(), int(total[1].item())


def rng_state():
    """This rank's random state: each rank draws its own dropout masks
    and augmentation picks, so each rank's is saved."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state):
    # map_location moved the tensors to this rank's device; the setters
    # take a CPU ByteTensor.
    torch.set_rng_state(state["torch"].cpu())
    random.setstate(state["python"])
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu())


def save_checkpoint(path, ddp_model, optimizer, scheduler, state):
    """Rank 0 writes everything a resume needs; `state` holds the next
    epoch and the early-stopping record. Collective: every rank's RNG
    state is gathered to rank 0, which writes them as one list (one file,
    one writer; a resume on the same number of ranks takes its entry)."""
    rngs = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(rng_state(), rngs, dst=0)
    if dist.get_rank() == 0:
        # Written aside, then renamed: a rank killed mid-save leaves the
        # previous checkpoint whole, never half of this one.
        torch.save({"model": ddp_model.module.state_dict(),  # no "module."
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "rng": rngs, **state}, path + ".tmp")
        os.replace(path + ".tmp", path)
    dist.barrier()              # nobody reads before it is written


def resume(path, model, optimizer, scheduler, device, log):
    """The saved state, loaded on every rank onto its own device
    (map_location), before DDP wraps the model: DDP copies rank 0's
    parameters and buffers to the others when it wraps, after that only
    the buffers (each forward), and never the optimizer's state. Returns
    the next epoch and the early-stopping record (an early stop is final:
    a resumed run does not train on); a fresh start when there is no
    checkpoint."""
    state = {"epoch": 0, "best": float("inf"), "bad_epochs": 0,
             "stopped": False}
    if not os.path.exists(path):
        return state
    saved = torch.load(path, map_location=device)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    if len(saved["rng"]) == dist.get_world_size():
        set_rng_state(saved["rng"][dist.get_rank()])
    else:             # another world size: seed_rank's draws, afresh
        log(f"RNG states of {len(saved['rng'])} ranks not restored")
    # How often this node's agent restarted its ranks after a failure (0:
    # a fresh start; a count per node, membership changes not counted).
    log(f"resumed from epoch {saved['epoch']} (torchrun restart "
        f"{os.environ.get('TORCHELASTIC_RESTART_COUNT', 0)})")
    return {k: saved.get(k, v) for k, v in state.items()}


def train_epoch(ddp_model, loader, optimizer, device, die_at_step=None,
                mix=0.0):
    """One pass over this rank's share; returns [loss sum, batches] and
    the first step's augmentation picks (None without --mix)."""
    total, first_picks = torch.zeros(2, device=device), None
    for step, (x, y) in enumerate(loader):
        if step == die_at_step:
            os.kill(os.getpid(), signal.SIGKILL)    # as an OOM kill does
        if mix:
            x, picks = mix_extras(x, loader.dataset, mix)
            first_picks = first_picks or picks
        loss = torch.nn.functional.mse_loss(ddp_model(x.to(device)),
                                            y.to(device))
        optimizer.zero_grad()
        loss.backward()                   # gradients all-reduced here
        optimizer.step()
        total += torch.stack([loss.detach(), torch.ones_like(loss)])
    return total, first_picks


def early_stop(state, val_loss, patience, min_delta, device):
    """Rank 0 decides from the reduced validation loss, every rank learns
    the decision (collective), so all leave the loop together: a rank
    that broke alone would leave the others waiting in a collective
    (book/when_ddp_hangs breaks it)."""
    stop = torch.zeros(1, device=device)
    if dist.get_rank() == 0:
        if val_loss < state["best"] - min_delta:
            state["best"], state["bad_epochs"] = val_loss, 0
        else:
            state["bad_epochs"] += 1
        stop[0] = 0 < patience <= state["bad_epochs"]
    dist.broadcast(stop, src=0)
    return bool(stop.item())


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--checkpoint", default=os.path.join(
        tempfile.gettempdir(), "train_ddp.pt"))
    parser.add_argument("--timeout", type=float,
                        default=TIMEOUT.total_seconds())
    parser.add_argument("--validate", type=float, default=0.0)
    parser.add_argument("--val-size", type=int, default=16)
    parser.add_argument("--mix", type=float, default=0.0)  # 0: no blending
    parser.add_argument("--patience", type=int, default=0)  # 0: never stop
    parser.add_argument("--min-delta", type=float, default=0.0)
    parser.add_argument("--die-at", default=None)            # "EPOCH:STEP"
    return parser.parse_args()


def main():
    args = parse_args()
    local_rank, device = setup(datetime.timedelta(seconds=args.timeout))
    rank, world_size = dist.get_rank(), dist.get_world_size()

    def log(line):                    # one line per job, not one per rank
        if rank == 0:
            print(line, flush=True)

    data = make_data()
    sampler = DistributedSampler(data, shuffle=True, seed=SEED)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    cache = f"{args.checkpoint}.val{args.val_size}"  # on storage it shares
    share = own_share(held_out(cache, args.val_size, rank), rank, world_size)
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2, gamma=0.5)
    seed_rank(rank)                      # after the model: same weights
    state = resume(args.checkpoint, model, optimizer, scheduler, device, log)
    ddp_model = DDP(model, device_ids=[local_rank] if device.type == "cuda"
                    else None)
    # --die-at E:S kills rank 1 once: the marker stops a restarted job
    # from dying again at the same step.
    die_epoch, die_step = map(int, (args.die_at or "-1:-1").split(":"))
    marker = args.checkpoint + ".died"

    lines = [f"RANK={rank} LOCAL_RANK={local_rank} "
             f"WORLD_SIZE={world_size} on {device} ({dist.get_backend()})"]
    last = state["epoch"] if state["stopped"] else args.epochs
    for epoch in range(first := state["epoch"], last):
        sampler.set_epoch(epoch)          # else every epoch has one order
        die = (rank == 1 and epoch == die_epoch
               and not os.path.exists(marker))
        if die:
            open(marker, "w").close()
        total, picks = train_epoch(ddp_model, loader, optimizer, device,
                                   die_step if die else None, args.mix)
        lines.append(f"epoch {epoch}: samples {list(sampler)[:4]}..."
                     + (f", first mix {picks}" if picks else ""))
        dist.all_reduce(total)            # every rank's sums, summed
        val_loss, count = evaluate(ddp_model.module, share, device)
        log(f"epoch {epoch}: mean loss over ranks "
            f"{total[0].item() / total[1].item():.3f}, val loss "
            f"{val_loss:.3f} (n={count}), lr {scheduler.get_last_lr()[0]:g}")
        scheduler.step()
        stop = early_stop(state, val_loss, args.patience, args.min_delta,
                          device)
        if rank == 0 and args.validate and epoch == first:
            log(f"rank 0 validates alone for {args.validate:g} s")
            time.sleep(args.validate)     # the others wait in save's gather
        save_checkpoint(args.checkpoint, ddp_model, optimizer, scheduler,
                        dict(state, epoch=epoch + 1, stopped=stop))
        if stop:
            log(f"early stop after epoch {epoch}")
            lines.append(f"stopped after epoch {epoch}")
            break

    same = os.path.exists(args.checkpoint)     # none after --epochs 0
    if same:
        loaded = torch.load(args.checkpoint, map_location=device)
        same = all(torch.equal(loaded["model"][k], v)
                   for k, v in model.state_dict().items())
    everyone = [None] * world_size    # (weights, share, same) per rank
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    dist.all_gather_object(everyone, (flat.cpu(), len(share), same))
    log(f"held-out shares per rank: {[n for _, n, _ in everyone]}")
    log("checkpoint loaded equals the trained weights on every rank: "
        f"{all(s for _, _, s in everyone)}")
    log("parameters equal on every rank: "
        f"{all(torch.equal(everyone[0][0], f) for f, _, _ in everyone)}")
    say(*lines)
    dist.barrier()      # no rank leaves while another still needs the group
    dist.destroy_process_group()


def say(*lines):
    """Every rank's lines, printed by rank 0 in rank order. Collective."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, [str(line) for line in lines])
    if dist.get_rank() == 0:
        for rank, rank_lines in enumerate(gathered):
            for line in rank_lines:
                print(f"[rank {rank}] {line}", flush=True)


if __name__ == "__main__":
    main()
