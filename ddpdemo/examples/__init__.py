"""Each chapter's program as a plain script for torchrun (see each module)."""
