"""Reproduction, written anew for ddpdemo's tests (no line copied), of
jpata/particleflow's mlpf/pyg/training.py after PR #233 ("fix pytorch
multi-GPU training hang"): commit
db423305e54f5ec03f25a1c63545f684eb625a48.

The barrier now sits where every rank reaches it, and validation uses
the unwrapped module. What PR #233 left: the count of stale epochs
still grows on rank 0 alone, so the early-stopping break is still
taken by rank 0 alone (read by hand as a real bug). Run by
tests/test_check.py; each `# expect: rule` comment names the finding
the check must give on the line below it, and no other.
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
        if world_size > 1:
            dist.barrier()
        if rank in (0, "cpu"):
            with torch.no_grad():
                val = sum(model.module(b).mean().item()
                          for b in loaders["valid"])
            if val < best:
                best, stale = val, 0
            else:
                stale += 1
        if world_size > 1:
            dist.barrier()
    return best
