"""What DistributedDataParallel communicates, observed from inside: a comm
hook that records each gradient bucket as DDP hands it over, and the
small models the DDP chapters wrap. Chapters 7 and 8.

    recorder = record_buckets(ddp_model)      # every rank
    ddp_model(x).sum().backward()
    recorder.calls    # [{"iteration", "index", "bytes", "params", ...}]

The hook does what DDP's default does (divide by the world size, then
all_reduce), so training is unchanged; it only writes down what it saw.
`record_buckets(ddp_model, hook=default_hooks.fp16_compress_hook)` writes
the bucket down and hands it to one of torch's hooks instead; chapter 9
uses that, with `last_collectives`, `shares_storage` and `storage_bytes`,
for compression and `gradient_as_bucket_view`. `CpuSyncBatchNorm` runs
torch's own SyncBatchNorm autograd function on the CPU (chapter 12).
"""
import functools
import itertools
import time

import torch
import torch.distributed as dist
from torch import nn


def mlp(widths=(8, 16, 16, 4), seed=None, batchnorm=False, device=None):
    """Linear layers of the given widths with ReLU between them (and a
    BatchNorm1d after the first, if asked): small enough to check by
    hand, deep enough to have several gradient buckets. `seed` fixes the
    initial weights (None: the generator's current state). Chapters 8, 9
    and 12."""
    if seed is not None:
        torch.manual_seed(seed)
    layers = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(widths)):
        layers.append(nn.Linear(n_in, n_out))
        if batchnorm and i == 0:
            layers.append(nn.BatchNorm1d(n_out))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).to(device or "cpu")


def fingerprint(module):
    """One number per parameter and buffer (its sum), by name: equal
    fingerprints on two ranks mean, for these checks, equal weights.
    Chapter 9."""
    return {name: round(t.detach().double().sum().item(), 6)
            for name, t in list(module.named_parameters())
            + list(module.named_buffers()) if t.is_floating_point()}


class BucketRecorder:
    """State of the recording hook: the calls so far and the names of the
    parameters, looked up by tensor identity. `iteration` is advanced by
    the caller (`next_iteration()`) so each call says which step it was.
    Chapter 9."""

    def __init__(self, module):
        self.names = {id(p): name for name, p in module.named_parameters()}
        self.calls = []
        self.buffers = []      # flat buffers kept by recording_hook
        self.iteration = 0

    def next_iteration(self):
        self.iteration += 1

    def buckets(self, iteration):
        """Calls of one iteration, in the order DDP made them."""
        return [c for c in self.calls if c["iteration"] == iteration]


def recording_allreduce_hook(state, bucket):
    """A DDP comm hook (register_comm_hook): write down the bucket, then
    divide it by the world size and all_reduce it asynchronously, in that
    order, as torch's default `allreduce_hook` does (dividing first keeps
    an fp16 sum from overflowing). Returns the Future DDP waits for.
    Chapter 9 prints this function as the lesson."""
    call = {"iteration": state.iteration, "index": bucket.index(),
            "bytes": bucket.buffer().numel() * bucket.buffer().element_size(),
            "params": [state.names[id(p)] for p in bucket.parameters()],
            "sizes": [p.numel() * p.element_size()
                      for p in bucket.parameters()],
            "start": time.perf_counter()}
    state.calls.append(call)
    bucket.buffer().div_(dist.get_world_size())      # divide, then sum
    work = dist.all_reduce(bucket.buffer(), async_op=True)

    def done(fut):
        call["end"] = time.perf_counter()
        return fut.value()[0]

    return work.get_future().then(done)


def recording_hook(hook):
    """A comm hook that writes the bucket down, as recording_allreduce_hook
    does, keeps its flat buffer (`state.buffers`), then hands the bucket
    to `hook`, one of torch's (default_hooks.allreduce_hook,
    fp16_compress_hook, ...), with the default group. Chapter 9
    (compression, gradient_as_bucket_view)."""
    def record_then(state, bucket):
        buffer = bucket.buffer()
        state.calls.append({"iteration": state.iteration,
                            "index": bucket.index(), "dtype": buffer.dtype,
                            "bytes": buffer.numel() * buffer.element_size(),
                            "params": [state.names[id(p)]
                                       for p in bucket.parameters()]})
        state.buffers.append(buffer)
        return hook(None, bucket)
    # A name of its own: register_comm_hook refuses bf16_compress_hook by
    # name on builds without CUDA or ROCm; chapter 9 runs it on gloo so.
    record_then.__name__ = f"recording_{hook.__name__}"
    return record_then


def record_buckets(ddp_model, hook=None):
    """Register the recording hook on a DDP model; returns its recorder.
    With `hook` (one of torch's), the bucket goes to it after being
    written down (see recording_hook). Must be called before the first
    forward, on every rank. Chapter 9."""
    recorder = BucketRecorder(ddp_model.module)
    ddp_model.register_comm_hook(recorder, recording_allreduce_hook
                                 if hook is None else recording_hook(hook))
    return recorder


def shares_storage(tensor, buffers):
    """Whether `tensor` lives in the memory of one of the flat `buffers`
    (a view into it, not a copy). Chapter 9 (gradient_as_bucket_view)."""
    ptr = tensor.untyped_storage().data_ptr()
    return any(ptr == b.untyped_storage().data_ptr() for b in buffers)


def storage_bytes(tensors):
    """Bytes of memory behind `tensors`, each storage counted once: views
    of one buffer cost nothing extra. Chapter 9 (gradient_as_bucket_view)."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in tensors}
    return sum(storages.values())


def last_collectives(n):
    """This rank's last `n` collectives as its Flight Recorder (chapter 10)
    saw them: (op, sizes and dtypes), oldest first. What went over the
    wire, whatever the Python around it did. Chapter 9 (compression)."""
    from .runtime.flight import record
    from .runtime.ledger import entries
    return [(e["op"], e["what"])
            for e in entries(record(stacks=False)["dump"])[-n:]]


def grad_ready_times(module):
    """Note when each parameter's gradient is accumulated in backward:
    returns a dict name -> perf_counter time, filled during backward.
    Chapter 9 (overlap)."""
    times = {}
    for name, p in module.named_parameters():
        p.register_post_accumulate_grad_hook(
            lambda _, name=name: times.__setitem__(name, time.perf_counter()))
    return times


def weights(module):
    """Each parameter, detached and on the CPU, by name. Chapters 8 and
    12."""
    return {name: p.detach().cpu().clone()
            for name, p in module.named_parameters()}


def grads(module):
    """Each parameter's gradient, detached and on the CPU, by name.
    Chapters 8, 9 and 12."""
    return {name: p.grad.detach().cpu().clone()
            for name, p in module.named_parameters() if p.grad is not None}


class TwoHeads(nn.Module):
    """Chapter 12's model with a branch: `a` always, `b` only when asked,
    so a step (or a rank) can leave `b`'s parameters without gradient.
    Chapter 12."""

    def __init__(self, n=4, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.a = nn.Linear(n, 2)
        self.b = nn.Linear(n, 2)

    def forward(self, x, use_b=True):
        y = self.a(x)
        return y + self.b(x) if use_b else y


class Swapped(nn.Module):
    """Two Linear(n, n) layers registered as `first`, `second` and run in
    the other order: backward computes `first`'s gradients before
    `second`'s, the reverse of what the registration order predicts.
    tests/test_ddp.py (buckets are launched in index order)."""

    def __init__(self, n=64, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.first = nn.Linear(n, n)
        self.second = nn.Linear(n, n)

    def forward(self, x):
        return self.first(torch.relu(self.second(x)))


def count_collectives(fn, *args, prefix="c10d::"):
    """Run fn(*args) under torch.profiler and count the c10d collectives
    it issued, by name ("c10d::allreduce_": 2, ...): what a step costs
    in messages, whatever the clock says. Returns (result, counts).
    Another `prefix` counts other named events, such as the reducer's
    copies ("torch::distributed::reducer::mul_out"). Chapters 7
    (wrapping, gradient_as_bucket_view) and 8 (find_unused_parameters,
    objects, Join, SyncBatchNorm)."""
    from collections import Counter
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        result = fn(*args)
    counts = Counter(e.name for e in prof.events()
                     if e.name.startswith(prefix))
    return result, dict(sorted(counts.items()))


# -- SyncBatchNorm on the CPU (chapter 12) --------------------------------
# nn.SyncBatchNorm refuses CPU input, and five of the kernels its autograd
# function calls have no CPU implementation in torch. Below, the same
# arithmetic on the CPU, registered for torch's own function to call: the
# collectives it makes (which, when, how large) are torch's code, the
# kernels ours. The tests check them against nn.BatchNorm1d on the whole
# batch.
def _channel(t, x):
    """A per-channel (C,) tensor shaped to broadcast against x (N, C, ...)."""
    return t.view([1, -1] + [1] * (x.dim() - 2))


def _stats(x, eps):                       # mean, 1/std of this rank
    dims = [d for d in range(x.dim()) if d != 1]
    var, mean = torch.var_mean(x, dims, correction=0)
    return mean, (var + eps).rsqrt()


def _gather_stats(x, means, invstds, running_mean, running_var, momentum,
                  eps, counts):           # (W, C) per rank -> global (C,)
    counts = counts.to(means.dtype).view(-1, 1)
    n = counts.sum()
    mean = (counts * means).sum(0) / n
    var = (counts * (invstds.pow(-2) - eps + (means - mean) ** 2)).sum(0) / n
    if running_mean is not None:
        running_mean.mul_(1 - momentum).add_(momentum * mean)
        running_var.mul_(1 - momentum).add_(momentum * var * n / (n - 1))
    return mean, (var + eps).rsqrt()


def _normalise(x, weight, bias, mean, invstd, eps):
    y = (x - _channel(mean, x)) * _channel(invstd, x)
    y = y * _channel(weight, x) if weight is not None else y
    return y + _channel(bias, x) if bias is not None else y


def _backward_reduce(dy, x, mean, invstd, weight, *needs):
    dims = [d for d in range(x.dim()) if d != 1]
    sum_dy = dy.sum(dims)
    sum_dy_xmu = (dy * (x - _channel(mean, x))).sum(dims)
    return sum_dy, sum_dy_xmu, sum_dy_xmu * invstd, sum_dy.clone()


def _backward_input(dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    n = count.sum().to(dy.dtype)          # samples on all ranks together
    xmu = x - _channel(mean, x)
    g = (dy - _channel(sum_dy, x) / n
         - xmu * _channel(invstd, x) ** 2 * _channel(sum_dy_xmu, x) / n)
    g = g * _channel(invstd, x)
    return g * _channel(weight, x) if weight is not None else g


@functools.cache
def _cpu_kernels():
    """Register the CPU kernels, once per process; the Library object
    must stay alive for them to stay registered."""
    lib = torch.library.Library("aten", "IMPL")
    for name, kernel in (
            ("batch_norm_stats", _stats),
            ("batch_norm_gather_stats_with_counts", _gather_stats),
            ("batch_norm_elemt", _normalise),
            ("batch_norm_backward_reduce", _backward_reduce),
            ("batch_norm_backward_elemt", _backward_input)):
        lib.impl(name, kernel, "CPU")
    return lib


class CpuSyncBatchNorm(nn.BatchNorm1d):
    """BatchNorm1d whose training forward and backward are torch's own
    SyncBatchNorm autograd function (torch.nn.modules._functions), on
    the CPU and the default group: what nn.SyncBatchNorm runs on a GPU,
    minus its device check. Not a subclass of nn.SyncBatchNorm, so DDP
    wraps it on the CPU. Chapter 12."""

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        from torch.nn.modules._functions import SyncBatchNorm
        _cpu_kernels()
        self.num_batches_tracked.add_(1)       # as nn.SyncBatchNorm does
        return SyncBatchNorm.apply(
            x, self.weight, self.bias, self.running_mean, self.running_var,
            self.eps, self.momentum, dist.group.WORLD,
            dist.get_world_size())
