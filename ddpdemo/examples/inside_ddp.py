"""Chapter 9's lessons (Inside DDP) as a script, run by
tests/test_ddp_examples.py: what DDP does to weights and gradients, and
the buckets it all-reduces them in.

    torchrun --standalone --nproc-per-node 2 -m ddpdemo.examples.inside_ddp

or `python -m torch.distributed.launch --nproc_per_node 2 inside_ddp.py`
from this folder. gloo on CPU, NCCL when every rank has a GPU.

Each rank seeds differently, so its model starts with different weights;
DDP(model) gives every rank rank 0's. One step on a batch of 4 per rank:
the gradient is the mean of the ranks' local gradients. A comm hook
(ddpdemo.ddp.recording_allreduce_hook) records the buckets of three steps:
one bucket in step 1, then buckets rebuilt in backward order.
"""
import copy

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpdemo import launch
from ddpdemo.ddp import fingerprint, grads, mlp, record_buckets
from ddpdemo.metrics import reduce_mean

WIDTHS = (64, 64, 64, 64)
BUCKET_CAP_MB = 0.015    # one 64x64 layer (16 640 bytes) per bucket


def main():
    rank, _, device = launch.init()
    torch.manual_seed(rank)                  # different weights per rank
    model = mlp(WIDTHS, device=device)
    before = fingerprint(model)["0.weight"]
    local = copy.deepcopy(model)
    ddp_model = DDP(model, bucket_cap_mb=BUCKET_CAP_MB)
    after = fingerprint(model)["0.weight"]
    recorder = record_buckets(ddp_model)

    g = torch.Generator().manual_seed(100 + rank)   # this rank's batch
    x = torch.randn(4, WIDTHS[0], generator=g).to(device)
    local.load_state_dict(model.state_dict())       # rank 0's weights
    lines = [f"0.weight sum {before:+.4f} before DDP, {after:+.4f} after"]
    for step in range(1, 4):
        recorder.next_iteration()
        ddp_model.zero_grad()
        ddp_model(x).pow(2).mean().backward()
        if step == 1:
            local(x).pow(2).mean().backward()
            mean = {k: reduce_mean(v.to(device)) for k, v in
                    grads(local).items()}
            same = all(torch.allclose(mean[k].cpu(), v, rtol=1e-5, atol=1e-7)
                       for k, v in grads(model).items())
            lines.append(f"gradient == mean of local gradients: {same}")
        for c in recorder.buckets(step):
            lines.append(f"step {step} bucket {c['index']}: {c['bytes']} "
                         f"bytes {' '.join(c['params'])}")
    launch.print_ranked(*lines)
    launch.finish()


if __name__ == "__main__":
    main()
