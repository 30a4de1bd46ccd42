"""A ring all-reduce written by hand with send/recv, and a figure of its
steps. Chapter 1, "A ring all-reduce by hand".

    ring_all_reduce(tensor)          # sums in place, like dist.all_reduce

The naive version, kept readable on purpose: a good starting point, not a
replacement for gloo's or NCCL's own. The tensor is cut into N chunks (N =
ranks in the group) and the ranks form a ring, each sending to the next:

- reduce-scatter, N-1 steps: at step s rank r sends chunk (r - s) % N to
  its right neighbour and adds the chunk it receives from its left one.
  After it, rank r holds the full sum of chunk (r + 1) % N.
- all-gather, N-1 steps: the finished chunks travel round the ring once
  more, each rank copying what it receives.

Each rank sends 2(N-1) chunks of 1/N of the data: 2(N-1)/N of the tensor,
less than twice its size whatever N is. `RingStats` counts it.
"""
from dataclasses import dataclass, field

import torch
import torch.distributed as dist


@dataclass
class RingStats:
    """What one rank's ring all-reduce did, step by step.

    steps: (phase, step, chunk sent, chunk received, bytes sent) for each
    step; snapshots: the first value of every chunk after each step
    (index 0 is before the first step), kept only if `keep_snapshots`.
    """
    keep_snapshots: bool = False
    world_size: int = 0
    rank: int = 0
    tensor_bytes: int = 0
    steps: list = field(default_factory=list)
    snapshots: list = field(default_factory=list)

    @property
    def bytes_sent(self):
        return sum(step[4] for step in self.steps)


def _peer(group, group_rank):
    """Global rank of a group member: send/recv take global ranks."""
    return group_rank if group is None else dist.get_global_rank(
        group, group_rank)


def _exchange(send_buf, recv_buf, right, left, group):
    """Send to the right neighbour while receiving from the left one.

    Both are posted before waiting on either: two blocking sends facing
    each other round a ring could wait for ever.
    """
    send = dist.isend(send_buf, dst=right, group=group)
    dist.recv(recv_buf, src=left, group=group)
    send.wait()


def ring_all_reduce(tensor, group=None, *, stats=None):
    """Sum `tensor` over the ranks of `group` in place; returns it.

    stats: an optional RingStats this rank fills in (bytes sent, chunks
    per step, and snapshots if it asks for them).
    """
    n = dist.get_world_size(group)
    rank = dist.get_rank(group)
    right, left = _peer(group, (rank + 1) % n), _peer(group, (rank - 1) % n)
    # Work on a flat contiguous view; copy back at the end if we had to
    # make one.
    flat = tensor.detach().reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    chunks = torch.tensor_split(flat, n)   # n views, sizes differ by <= 1
    if stats is not None:
        stats.world_size, stats.rank = n, rank
        stats.tensor_bytes = flat.numel() * flat.element_size()
        _snapshot(stats, chunks)

    for step in range(n - 1):                      # reduce-scatter
        send, recv = (rank - step) % n, (rank - step - 1) % n
        incoming = torch.empty_like(chunks[recv])
        _exchange(chunks[send], incoming, right, left, group)
        chunks[recv].add_(incoming)
        _record(stats, "reduce-scatter", step, send, recv, chunks)

    for step in range(n - 1):                      # all-gather
        send, recv = (rank + 1 - step) % n, (rank - step) % n
        incoming = torch.empty_like(chunks[recv])
        _exchange(chunks[send], incoming, right, left, group)
        chunks[recv].copy_(incoming)
        _record(stats, "all-gather", step, send, recv, chunks)

    if flat.data_ptr() != tensor.data_ptr():
        tensor.copy_(flat.view_as(tensor))
    return tensor


def _record(stats, phase, step, send, recv, chunks):
    if stats is None:
        return
    sent = chunks[send].numel() * chunks[send].element_size()
    stats.steps.append((phase, step + 1, send, recv, sent))
    _snapshot(stats, chunks)


def _snapshot(stats, chunks):
    if stats.keep_snapshots:
        stats.snapshots.append([c[0].item() if c.numel() else None
                                for c in chunks])


def plot_ring_steps(stats, title="ring all-reduce, step by step"):
    """One row per step, one block of N chunks per rank, from the RingStats
    of every rank (rank order, snapshots kept). Each box shows the first
    value the rank holds in that chunk; the chunk it sent in that step is
    outlined, and boxes holding the final sum are filled. Returns the
    figure. `ddpdemo.interactive.ring` steps through the same stats in
    the browser.
    """
    # Imported here: the ranks of a torchrun script use the ring, not
    # matplotlib.
    from .figures import box, new_figure, number, rank_color
    n = len(stats)
    rows = len(stats[0].snapshots)
    final = stats[0].snapshots[-1]
    labels = ["start"] + [f"{phase} {step}"
                          for phase, step, *_ in stats[0].steps]
    fig, axes = new_figure(height=0.9 + 0.42 * rows)
    ax = axes[0, 0]
    for rank, st in enumerate(stats):
        x0 = rank * (n + 1)
        for row, values in enumerate(st.snapshots):
            sent = st.steps[row - 1][2] if row else None
            for chunk, value in enumerate(values):
                done = value == final[chunk]
                outlined = chunk == sent
                box(ax, x0 + chunk, row, rank_color(rank),
                    face=None if done else "white",
                    edge="black" if outlined else None,
                    linewidth=2.0 if outlined else 0.8, inset=0.08)
                ax.text(x0 + chunk + 0.5, row + 0.5, number(value),
                        ha="center", va="center", fontsize=6.5,
                        color="white" if done else "black")
        ax.text(x0 + n / 2, -0.35, f"rank {rank}", ha="center",
                va="bottom", color=rank_color(rank), fontsize=9)
    ax.set_xlim(-0.2, n * (n + 1) - 0.8)
    ax.set_ylim(rows + 0.1, -0.9)
    ax.set_yticks([r + 0.5 for r in range(rows)], labels, fontsize=8)
    ax.set_xticks([])
    ax.spines[["bottom", "left"]].set_visible(False)
    ax.set_title(title + "  (outlined: chunk sent to the right; "
                 "filled: final sum)", fontsize=9)
    return fig
