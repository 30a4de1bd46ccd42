"""Chapter 6's names in one namespace, as the chapter and its script use
them (`from ddpdemo import data`; `data.TileDataset()`): the tiles and the
mosaic (ddpdemo.mosaic), measuring the ranks' picks (ddpdemo.diversity),
and the DataLoader worker-seed probe (ddpdemo.seeding).
"""
from .diversity import (diversity_figure, distinct_extras,
                        duplicate_fraction, expected_distinct,
                        expected_duplicate_fraction, simulate_distinct,
                        stack_picks)
from .mosaic import (FILL, FONT, N_TILES, SCALE, TILE,
                     TileDataset, digit_mask, load_mosaic, make_tile,
                     make_tiles, mosaics_figure, tiles_figure)
from .seeding import WorkerSeeds

__all__ = ["FILL", "FONT", "N_TILES", "SCALE", "TILE", "TileDataset",
           "WorkerSeeds", "digit_mask", "distinct_extras", "diversity_figure",
           "duplicate_fraction", "expected_distinct",
           "expected_duplicate_fraction", "load_mosaic", "make_tile",
           "make_tiles", "mosaics_figure", "simulate_distinct", "stack_picks",
           "tiles_figure"]
