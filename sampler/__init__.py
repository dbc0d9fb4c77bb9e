"""Per-row seeded sampling on a Philox4x32-10 stream: the CPU reference (numpy only)."""

from sampler.reference import sample
from sampler.stream import batch_bits, random_seed, row_bits

__all__ = ["batch_bits", "random_seed", "row_bits", "sample"]
