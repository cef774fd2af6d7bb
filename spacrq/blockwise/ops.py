"""Block operations over zarr arrays: read a block with its context, compute, write.

The ``blockwise`` queue module and ``spacrq blockwise run`` turn settings into
a process function built from :func:`block_function`: it reads the block's
read region from the input array (reflect-padded where the region reaches
past the volume, so smoothing is seamless at the edges), applies an
operation, and writes the block's write region to the output array.

Built-in operations are numpy-only:

* ``gaussian``   — separable Gaussian smoothing, ``sigma`` voxels (float32);
* ``threshold``  — ``1`` where the value is above ``level``, else ``0`` (uint8);
* ``downsample`` — mean over 2×2(×2…) cells, halving every axis (float32).

A scientist's own operation is ``package.module:function`` taking
``(data, block)`` — the read region as a numpy array and the block — and
returning the write region (or the read region, which is cropped).
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np
import zarr  # imported with the function, so a worker pays for it at start-up, not in block 1

__all__ = ["OPERATIONS", "block_function", "gaussian", "threshold", "downsample", "output_dtype"]

#: operation -> (needs context, output dtype, scale of the output per axis)
OPERATIONS: dict[str, dict[str, Any]] = {
    "gaussian": {"dtype": "float32", "scale": 1, "help": "Gaussian smoothing (setting sigma)"},
    "threshold": {"dtype": "uint8", "scale": 1, "help": "1 above 'level', else 0"},
    "downsample": {"dtype": "float32", "scale": 2, "help": "mean over 2x2 cells, halves each axis"},
}


def gaussian_radius(sigma: float) -> int:
    return max(1, int(math.ceil(3.0 * float(sigma))))


def gaussian(data: np.ndarray, sigma: float = 1.0) -> np.ndarray:
    """Separable Gaussian smoothing with a kernel cut at 3 sigma (same shape out)."""
    radius = gaussian_radius(sigma)
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    kernel = np.exp(-0.5 * (x / float(sigma)) ** 2)
    kernel /= kernel.sum()
    out = data.astype(np.float32, copy=True)
    for axis in range(out.ndim):
        padded = np.pad(out, [(radius, radius) if a == axis else (0, 0) for a in range(out.ndim)],
                        mode="reflect" if out.shape[axis] > radius else "edge")
        acc = np.zeros_like(out)
        n = out.shape[axis]
        for k, w in enumerate(kernel):
            acc += np.float32(w) * np.take(padded, np.arange(k, k + n), axis=axis)
        out = acc
    return out


def threshold(data: np.ndarray, level: float = 0.5) -> np.ndarray:
    return (data > level).astype(np.uint8)


def downsample(data: np.ndarray) -> np.ndarray:
    """Mean over 2-cells on every axis (odd trailing voxels are dropped)."""
    trimmed = data[tuple(slice(0, (s // 2) * 2) for s in data.shape)].astype(np.float32)
    shape = []
    for s in trimmed.shape:
        shape.extend([s // 2, 2])
    return trimmed.reshape(shape).mean(axis=tuple(range(1, 2 * trimmed.ndim, 2)))


def output_dtype(operation: str, dtype: str | None = None) -> str:
    if dtype:
        return str(dtype)
    return OPERATIONS.get(operation, {}).get("dtype", "float32")


@functools.lru_cache(maxsize=8)
def _open(path: str, mode: str):
    """Zarr arrays stay open for the life of the worker: opening costs milliseconds."""
    return zarr.open_array(path, mode=mode)


def read_padded(array, read_roi) -> np.ndarray:
    """The read region, reflect-padded where it reaches past the array."""
    begin = [max(0, b) for b in read_roi.begin]
    end = [min(n, e) for n, e in zip(array.shape, read_roi.end)]
    data = np.asarray(array[tuple(slice(b, e) for b, e in zip(begin, end))])
    pad = [(b - rb, re - e) for b, e, rb, re in zip(begin, end, read_roi.begin, read_roi.end)]
    if any(p for pair in pad for p in pair):
        mode = "reflect" if all(s > max(p) for s, p in zip(data.shape, pad)) else "edge"
        data = np.pad(data, pad, mode=mode)
    return data


def _apply(operation: str, params: dict, source: str, target: str, block) -> None:
    data = read_padded(_open(source, "r"), block.read_roi)
    if operation == "gaussian":
        result = gaussian(data, float(params.get("sigma", 1.0)))
    elif operation == "threshold":
        result = threshold(data, float(params.get("level", 0.5)))
    elif operation == "downsample":
        result = downsample(data)
    else:
        result = _custom(operation)(data, block)
    write = block.write_roi
    scale = int(params.get("scale", 1))
    out = _open(target, "r+")
    if scale == 1:
        # crop the context away: the write region relative to the read region
        if tuple(result.shape) != tuple(write.shape):
            offs = [w - r for w, r in zip(write.begin, block.read_roi.begin)]
            result = result[tuple(slice(o, o + s) for o, s in zip(offs, write.shape))]
        out[write.to_slices()] = result
    else:
        begin = [b // scale for b in write.begin]
        shape = [s // scale for s in write.shape]
        out[tuple(slice(b, b + s) for b, s in zip(begin, shape))] = result[tuple(slice(0, s) for s in shape)]


@functools.lru_cache(maxsize=8)
def _custom(target: str) -> Callable:
    from spacrq.modules import load_target
    return load_target(target)


def block_function(operation: str, source: str, target: str, **params) -> Callable:
    """A picklable process function applying ``operation`` from ``source`` into ``target``."""
    return functools.partial(_apply, operation, params, str(source), str(target))
