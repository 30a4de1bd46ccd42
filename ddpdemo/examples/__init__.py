"""Each chapter's program as a plain script for torchrun (see each module),
and the jobs of the diagnosis page, "Diagnose these" (puzzles)."""
