"""A clean DDP script, written anew for ddpdemo's tests (no line
copied), shaped like karpathy/nanoGPT's train.py at commit
3adf61e154c3fe3fca428ad6bc3818b27a3b8291: RANK read from the
environment, master_process = rank == 0, a per-rank seed offset, a
dtype chosen with torch.cuda.is_bf16_supported() before set_device
(it makes no CUDA context: a false alarm while the rules were written),
the unwrapped model saved by the master process alone.

    torchrun --standalone --nproc-per-node 4 clean_nanogpt_shape.py

The check must give no finding.
"""
import os

import torch
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

use_bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend="nccl")
    ddp_rank = int(os.environ["RANK"])
    ddp_local_rank = int(os.environ["LOCAL_RANK"])
    device = f"cuda:{ddp_local_rank}"
    torch.cuda.set_device(device)
    master_process = ddp_rank == 0
    seed_offset = ddp_rank
else:
    device = "cuda"
    master_process = True
    seed_offset = 0
torch.manual_seed(1337 + seed_offset)

model = torch.nn.Linear(64, 64).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank])
raw_model = model.module if ddp else model

for step in range(1000):
    x = torch.randn(8, 64, device=device)
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if step % 250 == 0 and master_process:
        print(f"step {step}: loss {loss.item():.4f}")
        torch.save({"model": raw_model.state_dict(), "step": step},
                   os.path.join("out", "ckpt.pt"))

if ddp:
    destroy_process_group()
