"""The jobs of "Diagnose these" (book/diagnose.ipynb): three small
training loops, each with a bug that hangs it on 2 ranks, one function
each. The page runs them with `cluster.run(job, timeout=3)` and shows
only what they leave (the stuck ranks' stacks, the Flight Recorder
ledger), so read this after answering. `fixed=True` runs the job with
the right fix of `FIXES`, what the page's solutions run;
tests/test_diagnose.py checks both, on real gloo ranks.

No DDP here: its first use imports torch._dynamo, which on a loaded
2-core machine can outlast a 3 s timeout. `train_step` averages the
gradients by hand in one all_reduce, as DDP does with one bucket
(chapter 9).
"""
import torch
import torch.distributed as dist

STEPS = 6            # batches per rank, the same on every rank
LR = 0.1
TARGET = 0.022       # early_stop: a validation loss low enough to stop
# Each sample's class; rank r trains on LABELS[r::world_size] at every
# step (a fixed shard keeps the puzzle deterministic).
LABELS = torch.tensor([0, 1, 2, 1, 0, 3, 2, 1])
CLASSES = 4

# The page's fixes to choose from (ddpdemo.diagnose.show_fixes(FIXES)).
FIXES = {
    "a": "put a dist.barrier() before the collective",
    "b": "call the helper on every rank; print on rank 0 only",
    "c": "give every rank as many batches",
    "d": "broadcast rank 0's decision, so that every rank acts on it",
    "e": "raise the group's timeout",
    "f": "make the tensor the same length on every rank",
}


def model():
    torch.manual_seed(0)                       # the same weights everywhere
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                               torch.nn.Linear(8, 1))


def batch(step):
    generator = torch.Generator().manual_seed(100 * dist.get_rank() + step)
    return torch.randn(8, 4, generator=generator)          # (8, 4)


def train_step(net, x):
    """One SGD step on the mean of the ranks' gradients; the loss."""
    loss = net(x).pow(2).mean()
    net.zero_grad()
    loss.backward()
    flat = torch.cat([p.grad.flatten() for p in net.parameters()])  # (49,)
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    with torch.no_grad():
        start = 0
        for p in net.parameters():
            p -= LR * flat[start:start + p.numel()].view_as(p)
            start += p.numel()
    return loss.item()


def log_losses(step, loss):
    """One log line with every rank's loss."""
    losses = [None] * dist.get_world_size()
    dist.all_gather_object(losses, round(loss, 3))
    if dist.get_rank() == 0:
        print(f"step {step}: losses {losses}")


def train_and_log(fixed=False):
    """Puzzle 1: the log helper's all_gather_object runs on rank 0 alone
    (inside `if rank == 0`), while rank 1 goes on to the next step's
    gradient all_reduce; both wait at collective 3, where they called
    different collectives. Fix b: every rank calls it."""
    net = model()
    for step in range(1, STEPS + 1):
        loss = train_step(net, batch(step))
        if (fixed or dist.get_rank() == 0) and step % 2 == 0:
            log_losses(step, loss)


def train_with_early_stop(fixed=False):
    """Puzzle 2: rank 0 alone validates and leaves the loop after step 3
    (its validation loss is below TARGET); rank 1, which never knew,
    waits in step 4's gradient all_reduce (collective 4) for ever.
    Fix d: broadcast rank 0's decision."""
    net = model()
    val = torch.randn(16, 4, generator=torch.Generator().manual_seed(7))
    for step in range(1, STEPS + 1):
        train_step(net, batch(step))
        stop = torch.zeros(1)
        if dist.get_rank() == 0:
            with torch.no_grad():
                stop[0] = float(net(val).pow(2).mean().item() < TARGET)
        if fixed:
            dist.broadcast(stop, src=0)
        if stop.item():
            break
    return step


def train_and_count(fixed=False):
    """Puzzle 3: the per-class counts come from torch.bincount, whose
    length is the largest class a rank saw, plus one: 3 on rank 0, 4 on
    rank 1. Gloo lets rank 0 finish its all_reduce of 3 (collective 2)
    and go on to the next step's, while rank 1 waits in its all_reduce
    of 4. Fix f: bincount(..., minlength=CLASSES)."""
    net = model()
    counts = 0
    labels = LABELS[dist.get_rank()::dist.get_world_size()]
    for step in range(1, STEPS + 1):
        train_step(net, batch(step))
        seen = torch.bincount(labels, minlength=CLASSES if fixed else 0)
        dist.all_reduce(seen)
        counts += seen
    return counts.tolist()
