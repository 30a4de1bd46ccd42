"""Chapter 6's data ("Seeds across ranks"), as the chapter and its
script, examples/seeds_mosaic.py, use it (`from ddpdemo import data`;
`data.TileDataset()`): a small labelled image data set and YOLOv5-style
mosaic augmentation, with figures of both; how random the ranks'
augmentations really are (which mosaic picks repeat across ranks, how
many distinct tiles a global batch uses, what independent ranks would
give, and a figure of it); and the DataLoader worker-seed probe
(WorkerSeeds, from ddpdemo.seeding).

The data set is made here, nothing is downloaded: 64 tiles of 48x48
pixels, each a distinct colour with its index written in every corner.
The classes live in this importable module because DataLoader workers
started with spawn or forkserver unpickle the data set, and a class
defined in a notebook cell cannot be imported by them.

picks is (world_size, steps, batch, 4) throughout, the sample first.
"""
import colorsys
import random

import torch
from torch.utils.data import Dataset

from .figures import new_figure, rank_color
from .seeding import WorkerSeeds

__all__ = ["FILL", "FONT", "N_TILES", "SCALE", "TILE", "TileDataset",
           "WorkerSeeds", "digit_mask", "distinct_extras", "diversity_figure",
           "duplicate_fraction", "expected_distinct",
           "expected_duplicate_fraction", "load_mosaic", "make_tile",
           "make_tiles", "mosaics_figure", "simulate_distinct", "stack_picks",
           "tiles_figure"]

N_TILES = 64
TILE = 48          # pixels per side
FILL = 114         # YOLOv5 fills the mosaic canvas with grey 114
# A 3x5 pixel font for the digits, one string of 15 bits per digit.
FONT = ("111101101101111", "010110010010111", "111001111100111",
        "111001111001111", "101101111001001", "111100111001111",
        "111100111101111", "111001001010010", "111101111101111",
        "111101111001111")
SCALE = 2          # font pixels per tile pixel side: digits are 6x10


def digit_mask(text, scale=SCALE):
    """(5 * scale, width) bool mask of `text` written in FONT."""
    columns = []
    for i, char in enumerate(text):
        bits = torch.tensor([b == "1" for b in FONT[int(char)]])
        if i:
            columns.append(torch.zeros(5, 1, dtype=torch.bool))
        columns.append(bits.reshape(5, 3))
    mask = torch.cat(columns, dim=1)
    return mask.repeat_interleave(scale, 0).repeat_interleave(scale, 1)


def make_tile(index, size=TILE):
    """Tile `index`: (3, size, size) uint8, a colour of its own (16 hues x
    4 shades) and the index in all four corners, so whichever corner a
    mosaic keeps shows the label."""
    hue, shade = (index % 16) / 16, index // 16 % 4
    rgb = colorsys.hsv_to_rgb(hue, 0.35 + 0.2 * shade, 0.95 - 0.2 * shade)
    tile = torch.tensor(rgb).mul(255).round().to(torch.uint8)
    tile = tile.reshape(3, 1, 1).repeat(1, size, size)
    ink = 0 if sum(rgb) / 3 > 0.55 else 255
    mask = digit_mask(f"{index:02d}")
    h, w = mask.shape
    m = 3   # margin
    for y, x in ((m, m), (m, size - w - m), (size - h - m, m),
                 (size - h - m, size - w - m)):
        tile[:, y:y + h, x:x + w][:, mask] = ink
    return tile


def make_tiles(n=N_TILES, size=TILE):
    """All tiles, (n, 3, size, size) uint8."""
    return torch.stack([make_tile(i, size) for i in range(n)])


def load_mosaic(tiles, index, rng=random):
    """YOLOv5's load_mosaic, reduced to tiles: the sample plus 3 others
    picked with `rng.choices`, laid out 2x2 around a random centre.

    rng: Python's `random` module (what YOLOv5 uses, so what the seed
    controls) or a `random.Random`. Returns the (3, 2s, 2s) uint8 canvas
    and the 4 picked indices, the sample first.
    """
    s = tiles.shape[-1]
    # The centre lies in the middle half of the 2s canvas, as in YOLOv5
    # (mosaic_border = -s // 2).
    yc, xc = (int(rng.uniform(s // 2, 3 * s // 2)) for _ in range(2))
    picks = [index, *rng.choices(range(len(tiles)), k=3)]
    canvas = torch.full((3, 2 * s, 2 * s), FILL, dtype=torch.uint8)
    for i, pick in enumerate(picks):
        # a: where the tile goes on the canvas; b: the part of it kept.
        if i == 0:    # top left, its bottom-right corner at the centre
            x1a, y1a, x2a, y2a = max(xc - s, 0), max(yc - s, 0), xc, yc
            x1b, y1b = s - (x2a - x1a), s - (y2a - y1a)
        elif i == 1:  # top right
            x1a, y1a, x2a, y2a = xc, max(yc - s, 0), min(xc + s, 2 * s), yc
            x1b, y1b = 0, s - (y2a - y1a)
        elif i == 2:  # bottom left
            x1a, y1a, x2a, y2a = max(xc - s, 0), yc, xc, min(yc + s, 2 * s)
            x1b, y1b = s - (x2a - x1a), 0
        else:         # bottom right
            x1a, y1a, x2a, y2a = xc, yc, min(xc + s, 2 * s), min(yc + s,
                                                                  2 * s)
            x1b, y1b = 0, 0
        h, w = y2a - y1a, x2a - x1a
        canvas[:, y1a:y2a, x1a:x2a] = tiles[pick][:, y1b:y1b + h,
                                                  x1b:x1b + w]
    return canvas, picks


class TileDataset(Dataset):
    """The 64 tiles; with mosaic=True each item is a mosaic of the tile
    and 3 random others. Items: (image uint8 (3, H, W), picks int64 (4,)
    or (1,)), so a batch says which tiles every image used."""

    def __init__(self, n=N_TILES, size=TILE, mosaic=True):
        self.tiles = make_tiles(n, size)
        self.mosaic = mosaic

    def __len__(self):
        return len(self.tiles)

    def __getitem__(self, index):
        if not self.mosaic:
            return self.tiles[index], torch.tensor([index])
        image, picks = load_mosaic(self.tiles, index)
        return image, torch.tensor(picks)



# -- figures --------------------------------------------------------------

def tiles_figure(tiles, ncols=8):
    """The whole data set as one grid of tiles."""
    n, _, s, _ = tiles.shape
    nrows = -(-n // ncols)
    grid = torch.full((3, nrows * s, ncols * s), 255, dtype=torch.uint8)
    for i, tile in enumerate(tiles):
        r, c = divmod(i, ncols)
        grid[:, r * s:(r + 1) * s, c * s:(c + 1) * s] = tile
    fig, axes = new_figure(height=0.5 + 7.0 * nrows / ncols)
    axes[0, 0].imshow(grid.permute(1, 2, 0).numpy(), interpolation="nearest")
    axes[0, 0].set_axis_off()
    return fig


def mosaics_figure(images, picks, samples=3, title=""):
    """Each rank's first `samples` mosaics of one batch, side by side.

    images: per rank (B, 3, H, W) uint8; picks: per rank (B, 4). One
    column per rank, its frame in the rank's colour; the title of each
    mosaic is its sample + the three extra tiles.
    """
    world_size = len(images)
    fig, axes = new_figure(samples, world_size, height=0.6 + 2.3 * samples)
    for rank in range(world_size):
        for row in range(samples):
            ax = axes[row, rank]
            ax.imshow(images[rank][row].permute(1, 2, 0).numpy(),
                      interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.spines[:].set_visible(True)
            ax.spines[:].set_color(rank_color(rank))
            ax.spines[:].set_linewidth(3)
            sample, *extras = picks[rank][row].tolist()
            ax.set_title(f"rank {rank}: {sample} + {extras}", fontsize=9,
                         color=rank_color(rank))
    if title:
        fig.suptitle(title)
    return fig


def stack_picks(results):
    """(world_size, steps, batch, 4) picks from what each rank returned:
    its list of (images, picks) batches."""
    return torch.stack([torch.stack([p for _, p in batches])
                        for batches in results])


def duplicate_fraction(picks):
    """Per step, the fraction of extra-tile picks (all ranks) equal to the
    pick in the same batch slot and position on some other rank. (steps,)
    """
    extras = picks[..., 1:]                               # (W, S, B, 3)
    same = extras.unsqueeze(0) == extras.unsqueeze(1)     # (W, W, S, B, 3)
    world_size = picks.shape[0]
    same[range(world_size), range(world_size)] = False    # not yourself
    return same.any(dim=1).float().mean(dim=(0, 2, 3))


def distinct_extras(picks):
    """Per step, how many different tiles the global batch's extra picks
    use. (steps,) int64."""
    extras = picks[..., 1:].transpose(0, 1).flatten(1)    # (S, W*B*3)
    return torch.tensor([len(set(step.tolist())) for step in extras])


def expected_duplicate_fraction(n, world_size):
    """If ranks draw independently and uniformly from n tiles: chance that
    at least one of the other world_size - 1 ranks drew the same tile."""
    return 1 - (1 - 1 / n) ** (world_size - 1)


def expected_distinct(n, k):
    """Expected number of distinct tiles among k uniform picks, with
    replacement, from n: each tile is missed with chance (1 - 1/n)^k."""
    return n * (1 - (1 - 1 / n) ** k)


def simulate_distinct(n, k, trials=20000, seed=0):
    """expected_distinct by simulation, with random.choices like the
    mosaic; a check on the formula."""
    rng = random.Random(seed)
    population = range(n)
    total = sum(len(set(rng.choices(population, k=k)))
                for _ in range(trials))
    return total / trials


def diversity_figure(distinct, independent, shared, title=""):
    """Distinct extra tiles per global batch, step by step, against the
    expected count for independent ranks and for ranks sharing a seed."""
    fig, axes = new_figure(height=2.6)
    ax = axes[0, 0]
    steps = range(len(distinct))
    ax.bar(steps, distinct.tolist(), color=rank_color(0), alpha=0.8,
           label="measured")
    ax.axhline(independent, color="black", ls="--",
               label=f"independent ranks: {independent:.1f}")
    ax.axhline(shared, color=rank_color(3), ls=":",
               label=f"one shared seed: {shared:.1f}")
    ax.set_xlabel("step")
    ax.set_ylabel("distinct extra tiles")
    ax.set_ylim(0, 1.4 * max(distinct.max().item(), independent))
    ax.set_title(title)
    ax.legend(loc="upper center", fontsize=8, ncol=3)
    return fig
