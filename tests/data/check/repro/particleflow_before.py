"""Reproduction, written anew for ddpdemo's tests (no line copied), of
jpata/particleflow's mlpf/pyg/training.py before PR #233 ("fix pytorch
multi-GPU training hang"): commit
59b5d97f116f41c10735aa72fb082984efc8d80a, the parent of db423305.

Two bugs: validation on rank 0 alone starts with a dist.barrier() that
the other ranks never reach (the one PR #233 moved out), and the count
of stale epochs grows on rank 0 alone, so rank 0 alone leaves the epoch
loop while the others wait in their next step's gradient all_reduce.
Run by tests/test_check.py; each `# expect: rule` comment names the
finding the check must give on the line below it, and no other.
"""
import torch
import torch.distributed as dist


def one_epoch(model, loader, optimizer):
    total = 0.0
    for batch in loader:
        optimizer.zero_grad()
        loss = model(batch).mean()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / max(len(loader), 1)


def fit(rank, world_size, model, loaders, epochs, patience):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    best, stale = float("inf"), 0
    for _epoch in range(epochs):
        # expect: lone-decision
        if stale > patience:
            break
        one_epoch(model, loaders["train"], optimizer)
        if rank in (0, "cpu"):
            if world_size > 1:
                # expect: collective-on-some-ranks
                dist.barrier()
            with torch.no_grad():
                val = sum(model.module(b).mean().item()
                          for b in loaders["valid"])
            if val < best:
                best, stale = val, 0
            else:
                stale += 1
    return best
