"""Process functions for bench_blockwise.py, in a module of their own so worker
processes import only this (not the benchmark script and everything it imports)."""
from __future__ import annotations


def noop(block) -> None:
    pass


def cpu_block(iterations, block) -> None:
    """About 20 ms of single-threaded numpy arithmetic (numpy imported on first use)."""
    import numpy as np
    x = np.linspace(0.0, 1.0, 50_000)
    for _ in range(iterations):
        x = np.sin(x) * 0.5 + 0.25
