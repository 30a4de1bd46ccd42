"""ddpdemo.ddp and ddpdemo.ddp_figures (chapters 7 and 8): the recording
comm hook and the helpers, on a real 2-rank gloo group, each checked
against a single-process reference; the figures on made-up records."""
import pytest
import torch

from ddpdemo.ddp import TwoHeads, fingerprint, grads, mlp
from ddpdemo.ddp_figures import buckets, overlap

pytestmark = pytest.mark.timeout(180)

WIDE = (64, 64, 64, 64, 64)     # four 64x64 layers: 16 640 bytes each
X = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))


CLUSTER = dict(timeout=60)      # the conftest's 2-rank gloo cluster


# -- on the ranks -------------------------------------------------------
def wrap_seeded_by_rank():
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(dist.get_rank())
    model = mlp((4, 8, 2), batchnorm=True)
    model[1].running_var.fill_(dist.get_rank() + 1.0)
    before = fingerprint(model)
    DDP(model)
    return before, fingerprint(model)


def step(hook, bucket_cap_mb=None, steps=3):
    """Gradients after `steps` backward passes on this rank's half of X,
    with or without the recording hook, and what the hook recorded."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from ddpdemo.ddp import record_buckets
    rank = dist.get_rank()
    model = DDP(mlp(WIDE if bucket_cap_mb else (8, 16, 4), seed=0),
                bucket_cap_mb=bucket_cap_mb)
    recorder = record_buckets(model) if hook else None
    x = X[4 * rank:4 * rank + 4]
    if bucket_cap_mb:
        x = torch.randn(4, 64, generator=torch.Generator().manual_seed(rank))
    for _ in range(steps):
        if recorder:
            recorder.next_iteration()
        model.zero_grad()
        model(x).pow(2).mean().backward()
    calls = [{k: c[k] for k in ("iteration", "index", "bytes", "params")}
             for c in recorder.calls] if recorder else None
    return grads(model.module), calls


def accumulate(k):
    import contextlib
    from torch.nn.parallel import DistributedDataParallel as DDP
    from ddpdemo.ddp import record_buckets
    model = DDP(mlp((8, 16, 4), seed=0))
    recorder, counts = record_buckets(model), []
    for i in range(2 * k):
        last = i % k == k - 1
        with contextlib.nullcontext() if last else model.no_sync():
            model(X[:2]).sum().backward()
        counts.append(len(recorder.calls))
    return counts


def timed():
    import time
    from torch.nn.parallel import DistributedDataParallel as DDP
    from ddpdemo.ddp import grad_ready_times, record_buckets
    model = mlp((32,) * 4, seed=0)
    ddp_model = DDP(model, bucket_cap_mb=0.004)
    recorder = record_buckets(ddp_model)
    ddp_model(torch.ones(4, 32)).sum().backward()
    recorder.next_iteration()
    ready = grad_ready_times(model)
    ddp_model(torch.ones(4, 32)).sum().backward()
    return ready, recorder.buckets(1), time.perf_counter()


def count_all_reduce():
    import torch.distributed as dist
    from ddpdemo.ddp import count_collectives
    t = torch.ones(3)
    return count_collectives(lambda: dist.all_reduce(t) or t.sum().item())


# -- tests ---------------------------------------------------------------
def test_mlp_is_seeded_and_places_batchnorm_after_the_first_layer():
    a, b = mlp((4, 8, 2), seed=3), mlp((4, 8, 2), seed=3)
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint(mlp((4, 8, 2), seed=4))
    kinds = [type(m).__name__ for m in mlp((4, 8, 8, 2), batchnorm=True)]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Linear", "ReLU",
                     "Linear"]


def test_two_heads_leaves_b_without_gradient_when_unused():
    model = TwoHeads()
    model(torch.ones(2, 4), use_b=False).sum().backward()
    assert set(grads(model)) == {"a.weight", "a.bias"}


def test_wrapping_gives_every_rank_rank_0s_parameters_and_buffers(cluster):
    (before0, after0), (before1, after1) = cluster.run(wrap_seeded_by_rank)
    assert before0 != before1
    assert before0["1.running_var"] != before1["1.running_var"]
    assert after0 == after1 == before0


def test_ddp_gradient_is_the_single_process_gradient_on_the_whole_batch(
        cluster):
    (g0, _), (g1, _) = cluster.run(step, False, steps=1)
    reference = mlp((8, 16, 4), seed=0)
    reference(X).pow(2).mean().backward()
    for name, grad in grads(reference).items():
        assert torch.equal(g0[name], g1[name])
        torch.testing.assert_close(g0[name], grad, rtol=1e-5, atol=1e-7)


def test_recording_hook_gives_the_gradients_ddp_gives_without_it(cluster):
    plain = cluster.run(step, False)
    hooked = cluster.run(step, True)
    for (g, _), (h, calls) in zip(plain, hooked, strict=True):
        assert len(calls) == 3                  # one bucket a step
        for name in g:
            torch.testing.assert_close(h[name], g[name])


def test_hook_sees_one_bucket_then_reversed_buckets_of_the_cap(cluster):
    (_, calls0), (_, calls1) = cluster.run(step, True, 0.015)
    assert calls0 == calls1
    order = [n for n, _ in mlp(WIDE).named_parameters()]
    first = [c for c in calls0 if c["iteration"] == 1]
    assert [(c["index"], c["bytes"], c["params"]) for c in first] == [
        (0, 4 * 16640, order)]
    for step_ in (2, 3):
        later = [c for c in calls0 if c["iteration"] == step_]
        assert [c["index"] for c in later] == [0, 1, 2, 3]
        assert all(c["bytes"] == 16640 for c in later)
        assert [p for c in later for p in c["params"]] == order[::-1]


def test_no_sync_makes_one_all_reduce_per_k_backward_passes(cluster):
    assert cluster.run(accumulate, 3) == [[0, 0, 1, 1, 1, 2]] * 2


def test_buckets_start_before_backward_ends_and_end_before_it_returns(
        cluster):
    for ready, calls, returned in cluster.run(timed):
        assert len(ready) == 6 and len(calls) > 1
        last_grad = max(ready.values())
        assert all(c["start"] < last_grad for c in calls[:-1])
        assert calls[-1]["start"] >= last_grad
        assert all(c["end"] < returned for c in calls)


def test_count_collectives_counts_one_all_reduce(cluster):
    for value, counts in cluster.run(count_all_reduce):
        assert value == 6.0 and counts == {"c10d::allreduce_": 1}


# -- figures, single process --------------------------------------------
def hooked(hook_name, as_view=False):
    """One step through record_buckets(hook=torch's hook): the gradient,
    this rank's local gradient, what the recorder saw, what went over
    the wire, and whether .grad lives in the kept bucket buffer."""
    import copy
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    from ddpdemo.ddp import last_collectives, record_buckets, shares_storage
    model = mlp(WIDE, seed=0)
    local = copy.deepcopy(model)
    ddp_model = DDP(model, gradient_as_bucket_view=as_view)
    recorder = record_buckets(ddp_model, getattr(default_hooks, hook_name))
    g = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(4, 64, generator=g)
    for _ in range(2):                # views are set up after step 1
        model.zero_grad(set_to_none=False)
        ddp_model(x).sum().backward()
    local(x).sum().backward()
    views = all(shares_storage(p.grad, recorder.buffers[-1:])
                for p in model.parameters())
    call = recorder.calls[-1]
    return (grads(model), grads(local), (call["dtype"], call["bytes"]),
            last_collectives(1)[0], views)


def test_recording_hook_hands_the_bucket_to_torchs_hook(cluster):
    (full0, local0, seen0, wire0, _), (_, local1, *_) = cluster.run(
        hooked, "allreduce_hook")
    (half0, _, seen_half, wire_half, _), _ = cluster.run(
        hooked, "fp16_compress_hook")
    assert seen0 == seen_half == (torch.float32, 66560)
    assert wire0 == ("all_reduce", "[16640] Float")
    assert wire_half == ("all_reduce", "[16640] Half")
    u = 2.0 ** -11                     # float16's unit roundoff
    for k in full0:
        assert torch.allclose(full0[k], (local0[k] + local1[k]) / 2,
                              rtol=1e-5, atol=1e-7)
        size = (local0[k].abs() + local1[k].abs()) / 2
        err = (half0[k] - full0[k]).abs()
        assert (err <= (u * (2 + u) + 2 ** -24) * size + 2 ** -23).all()
    assert any(not torch.equal(half0[k], full0[k]) for k in full0)


def register_bf16_by_name():
    """register_comm_hook with torch's bf16 hook itself: its error text,
    or None when the build takes it."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    try:
        DDP(mlp(WIDE, seed=0)).register_comm_hook(
            None, default_hooks.bf16_compress_hook)
    except TypeError as error:
        return str(error)
    return None


def test_renamed_bf16_hook_runs_on_gloo_where_its_name_is_refused(cluster):
    # Chapter 7: DDP's check is on the hook's name and the build; the
    # recording hook's new name passes it, and the hook itself runs.
    if torch.version.cuda is torch.version.hip is None:      # a CPU build
        refused = cluster.run(register_bf16_by_name)
        assert all("BF16" in str(error) for error in refused)
    (bf0, _, seen, wire, _), _ = cluster.run(hooked, "bf16_compress_hook")
    (full0, local0, *_), (_, local1, *_) = cluster.run(hooked,
                                                        "allreduce_hook")
    assert seen == (torch.float32, 66560)
    assert wire == ("all_reduce", "[16640] BFloat16")
    u = 2.0 ** -8                      # bfloat16's unit roundoff
    for k in full0:
        size = (local0[k].abs() + local1[k].abs()) / 2
        err = (bf0[k] - full0[k]).abs()
        assert (err <= (u * (2 + u) + 2 ** -24) * size + 2 ** -132).all()
    assert any(not torch.equal(bf0[k], full0[k]) for k in full0)


def test_gradient_as_bucket_view_puts_grad_in_the_kept_buffer(cluster):
    assert [r[4] for r in cluster.run(hooked, "allreduce_hook", True)] \
        == [True, True]
    assert [r[4] for r in cluster.run(hooked, "allreduce_hook")] \
        == [False, False]


def test_shares_storage_and_storage_bytes_count_views_once():
    from ddpdemo.ddp import shares_storage, storage_bytes
    flat = torch.zeros(10)
    views = [flat[:4].view(2, 2), flat[4:]]
    assert all(shares_storage(v, [flat]) for v in views)
    assert not shares_storage(flat[:4].clone(), [flat])
    assert storage_bytes([*views, flat]) == 40
    assert storage_bytes([flat[:4].clone(), flat]) == 56


def test_buckets_figure_draws_each_parameter_as_wide_as_its_gradient():
    layout = {"one": [[("w", 100), ("b", 10)]],
              "two": [[("w2", 50)], [("b2", 5), ("w1", 40)]]}
    fig = buckets(layout)
    widths = [p.get_width() for p in fig.axes[0].patches]
    assert widths == [100, 10, 50, 5, 40]
    lefts = [p.get_x() for p in fig.axes[0].patches]
    assert lefts == [0, 100, 0, 50, 55]
    # one colour per bucket, the same across rows
    colors = [p.get_facecolor() for p in fig.axes[0].patches]
    assert colors[0] == colors[1] == colors[2] != colors[3] == colors[4]


def test_overlap_figure_puts_each_rank_on_its_own_clock():
    records = [{"backward": (10.0, 10.5), "grads": {"a": 10.2, "b": 10.5},
                "buckets": [{"index": 0, "start": 10.2, "end": 10.6},
                            {"index": 1, "start": 10.5, "end": 10.7}]},
               {"backward": (99.0, 99.4), "grads": {"a": 99.4},
                "buckets": [{"index": 0, "start": 99.4, "end": 99.5}]}]
    ax = overlap(records).axes[0]
    bars = [(round(p.get_x(), 6), round(p.get_width(), 6))
            for p in ax.patches]
    assert bars == [(0.0, 0.5), (0.2, 0.4), (0.5, 0.2),
                    (0.0, 0.4), (0.4, 0.1)]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "rank 0 gradients", "rank 0 all_reduce",
        "rank 1 gradients", "rank 1 all_reduce"]


def near_overflow(hook):
    """The gradient of a weight whose local gradient is 3e38 on every
    rank: a mean taken by summing first would overflow to inf."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    from ddpdemo.ddp import record_buckets
    model = DDP(torch.nn.Linear(1, 1, bias=False))
    if hook:
        record_buckets(model)
    model(torch.full((1, 1), 3e38)).sum().backward()
    return model.module.weight.grad.item()


def test_recording_hook_divides_before_summing_like_ddps_default(cluster):
    plain, hooked = (cluster.run(near_overflow, hook) for hook in (0, 1))
    assert plain == hooked
    assert all(3e38 * 0.99 < g < 3e38 * 1.01 for g in hooked)   # not inf


def test_swapped_computes_firsts_gradients_before_seconds():
    from ddpdemo.ddp import Swapped, grad_ready_times
    model = Swapped(n=8)
    assert [n for n, _ in model.named_parameters()] == [
        "first.weight", "first.bias", "second.weight", "second.bias"]
    ready = grad_ready_times(model)
    model(torch.ones(2, 8)).sum().backward()
    assert max(ready["first.weight"], ready["first.bias"]) < min(
        ready["second.weight"], ready["second.bias"])


# -- SyncBatchNorm on the CPU -------------------------------------------
def sync_bn_step(sizes=(4, 4)):
    """Linear(3, 3) then CpuSyncBatchNorm(3), on this rank's share of
    X[:, :3] (sizes[rank] samples): output, the Linear's local weight
    gradient, running statistics, and the collectives of forward and of
    backward."""
    import torch.distributed as dist
    from ddpdemo.ddp import CpuSyncBatchNorm, count_collectives
    rank = dist.get_rank()
    torch.manual_seed(0)
    linear, norm = torch.nn.Linear(3, 3), CpuSyncBatchNorm(3)
    start = sum(sizes[:rank])
    x = X[start:start + sizes[rank], :3]
    out, forward = count_collectives(lambda: norm(linear(x)))
    weight = torch.arange(3.0) + 1                 # a loss that is not flat
    _, backward = count_collectives((out * weight).sum().backward)
    return (out.detach(), linear.weight.grad, norm.running_mean.clone(),
            norm.running_var.clone(), forward, backward)


def test_cpu_sync_batchnorm_is_batchnorm_on_the_whole_batch(cluster):
    # Unequal shares (5 and 3 samples): the all-gathered counts weigh them.
    ranks = cluster.run(sync_bn_step, (5, 3))
    torch.manual_seed(0)
    linear, norm = torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)
    out = norm(linear(X[:, :3]))
    (out * (torch.arange(3.0) + 1)).sum().backward()
    tol = dict(rtol=1e-4, atol=1e-5)
    assert torch.allclose(torch.cat([r[0] for r in ranks]), out.detach(),
                          **tol)
    # Each rank's Linear gradient is local; their sum is one process's.
    assert torch.allclose(ranks[0][1] + ranks[1][1], linear.weight.grad,
                          **tol)
    for r in ranks:
        assert torch.allclose(r[2], norm.running_mean, **tol)
        assert torch.allclose(r[3], norm.running_var, **tol)
        assert r[4] == {"c10d::allgather_": 1}
        assert r[5] == {"c10d::allreduce_": 1}


def reducer_copies(as_view, zero_grad):
    """The reducer's copies in a third step: into the buckets (mul_out)
    and back into .grad (copy_bucket_to_grad)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    from ddpdemo.ddp import count_collectives
    model = DDP(mlp((8, 16, 4), seed=0), gradient_as_bucket_view=as_view)
    for _ in range(3):
        if zero_grad:
            model.zero_grad()                  # set_to_none=True
        _, counts = count_collectives(
            lambda: model(X[:2]).sum().backward(), prefix="torch")
    return {name.split("::")[-1]: n for name, n in counts.items()
            if "reducer" in name}


def test_count_collectives_counts_the_reducers_copies(cluster):
    assert cluster.run(reducer_copies, False, False)[0] == {
        "mul_out": 4, "copy_bucket_to_grad": 4}
    assert cluster.run(reducer_copies, True, False)[0] == {}
    assert cluster.run(reducer_copies, True, True)[0] == {"mul_out": 4}
