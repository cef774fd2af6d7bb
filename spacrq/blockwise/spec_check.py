"""Checking one blockwise step before anything runs: every number, type, size and file.

A step that would fail on every block — a context wider than the volume, a
data type numpy does not know, a number that is not a number — costs the
operator a night if it is found by the workers.  :func:`check_step` finds
it at the door instead, every problem at once, each naming the setting and
the fix in plain words (never Python's own "invalid literal for int()"),
and hands :mod:`spacrq.blockwise.spec` the step's values made whole, so the
task is built only from numbers that were checked.

The input's zarr metadata is read with the run-file protocol's one strict
reader: garbage, a list, ``NaN`` or a shape that is not one whole number per
axis is a sentence naming the file.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from spacrq.blockwise.ops import OPERATIONS, gaussian_radius
from spacrq.problems import ERROR, WARNING, Problem
from spacrq.runfiles import RunFileError, read_json

__all__ = ["check_step", "zarr_array_shape", "resolve", "MAX_WORKERS", "MAX_RETRIES", "MAX_BLOCKS",
           "MAX_AXES", "MAX_META_BYTES", "FORMAT_HELP"]

#: more workers than this is a typo (a fork bomb), not a plan: the local executor is one machine
MAX_WORKERS = 256
MAX_RETRIES = 100
#: a tracking store holds ~50 bytes per block in memory while a run goes
MAX_BLOCKS = 10_000_000
MAX_AXES = 32
#: zarr metadata is a few hundred bytes; a megabyte of it is not metadata
MAX_META_BYTES = 1 << 20
#: where every setting is described (said in messages about the spec's format)
FORMAT_HELP = ("see docs/blockwise.md, or run 'python -m spacrq.run blockwise --describe' "
               "for every setting")
_TEXT_SETTINGS = ("task_id", "input", "output", "operation", "function", "dtype", "tracking",
                  "executor")
_DTYPE_KINDS = {"b": "true/false", "i": "whole numbers", "u": "whole numbers", "f": "numbers"}
_EXAMPLES = {"task_id": "smooth", "input": "raw.zarr", "output": "smooth.zarr",
             "operation": "gaussian", "function": "mylab.steps:segment", "dtype": "float32",
             "tracking": "runs/smooth", "executor": "local"}


def resolve(path: Any, base: Path) -> Path:
    p = Path(str(path)).expanduser()
    return p if p.is_absolute() else base / p


def same_place(a: Path, b: Path) -> bool:
    """Whether two paths name one folder, however spelled (``./x/../in.zarr``, a link to it).

    A step whose output is its input spelled another way would smooth the
    input in place; two steps writing one folder would overwrite each other.
    """
    return os.path.realpath(a) == os.path.realpath(b)


def _show(value: Any) -> str:
    """A setting's value as the operator wrote it, cut short when it is long."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _whole(value: Any, strings: bool = True) -> int | None:
    """``value`` as a whole number, or None (inf, NaN, 2.5, true, "x" are not whole numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if strings and isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _real(value: Any) -> float | None:
    """``value`` as a finite number, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an int with thousands of digits
            return None
        return number if math.isfinite(number) else None
    return None


def _read_meta(path: Path) -> dict:
    """A zarr metadata file as an object, or RunFileError naming it (the one strict reader)."""
    doc = read_json(path, None, expect=dict, max_bytes=MAX_META_BYTES)
    if doc is None:
        raise RunFileError(f"{path} is empty; write the array again or point at another one", path)
    return doc


def _shape_of(doc: dict, meta: Path) -> tuple[tuple[int, ...] | None, str]:
    shape = doc.get("shape")
    if not isinstance(shape, list) or not 1 <= len(shape) <= MAX_AXES:
        return None, (f"{meta} has no \"shape\" list of 1 to {MAX_AXES} sizes; "
                      "write the array again or point at another one")
    sizes = [_whole(n, strings=False) for n in shape]
    if any(n is None or n < 0 for n in sizes):
        return None, (f"{meta} gives the shape {_show(shape)}, which is not one whole number "
                      "per axis; write the array again or point at another one")
    if any(n == 0 for n in sizes):
        return None, f"it holds no voxels (shape {sizes}); point at an array with data"
    return tuple(sizes), ""


def zarr_array_shape(path: Path) -> tuple[tuple[int, ...] | None, str]:
    """``(shape, "")`` of the zarr array at ``path``, or ``(None, why not)``.

    ``why`` is "it does not exist" exactly when nothing is there, so a step
    reading what an earlier step will write can be told apart from a broken one.
    """
    meta = path / "zarr.json"
    v2 = path / ".zarray"
    try:
        if meta.exists():
            doc = _read_meta(meta)
            if doc.get("node_type") != "array":
                if doc.get("node_type") == "group":
                    return None, "it is a zarr group, not an array; name the array inside it"
                return None, (f"{meta} does not describe a zarr array (no \"node_type\": "
                              "\"array\"); write the array again or point at another one")
            return _shape_of(doc, meta)
        if v2.exists():
            return _shape_of(_read_meta(v2), v2)
    except RunFileError as exc:
        return None, str(exc)
    if path.exists():
        return None, "it is not a zarr array (no zarr.json)"
    return None, "it does not exist"


def _per_axis(value: Any, dims: int) -> list[int] | None:
    """One whole number per axis (a single number applies to every axis), or None."""
    if isinstance(value, (list, tuple)):
        if len(value) != dims:
            return None
        sizes = [_whole(v, strings=False) for v in value]
        return None if any(v is None for v in sizes) else sizes
    one = _whole(value, strings=False)
    return None if one is None else [one] * dims


def check_step(settings: dict, defaults: dict, base: Path, job_id: str = "",
               upstream_outputs=frozenset()) -> tuple[list[Problem], dict[str, Any]]:
    """Every problem with one step, and the step's values made whole for building its task.

    ``defaults`` fills what the step leaves out; a key it does not know is
    a warning (a misspelt setting would otherwise be silently ignored).
    """
    s = {**defaults, **settings}
    out: list[Problem] = []
    v: dict[str, Any] = {}

    def bad(setting: str, message: str, fix: str, severity: str = ERROR) -> None:
        out.append(Problem(job_id, severity, message, fix, setting=setting))

    not_text = set()
    for key in _TEXT_SETTINGS:
        if s.get(key) is None:
            s[key] = ""
        if not isinstance(s[key], str):
            not_text.add(key)
            bad(key, f"{key} {_show(s[key])} is not text",
                f"Give {key} as text in double quotes, e.g. \"{_EXAMPLES[key]}\".")
            s[key] = ""
    for key in settings:
        if key not in defaults:
            bad(key, f"{key!r} is not a setting of a blockwise step, so it is ignored",
                f"Check the spelling; the settings are {', '.join(defaults)} ({FORMAT_HELP}).",
                WARNING)

    shape = None
    if not s["input"]:
        if "input" not in not_text:
                bad("input", "no input array is given", "Set 'input' to the zarr array to process.")
    else:
        src = resolve(s["input"], base)
        shape, why = zarr_array_shape(src)
        if shape is None and not (why == "it does not exist" and str(src) in upstream_outputs):
            bad("input", f"input array {src} cannot be used: {why}",
                "Point 'input' at an existing zarr array (the folder holding zarr.json).")
    v["shape"] = shape
    if not s["output"]:
        if "output" not in not_text:
            bad("output", "no output array is given", "Set 'output' to the zarr array to write.")
    elif s["input"] and same_place(resolve(s["output"], base), resolve(s["input"], base)):
        bad("output", "output is the same array as input",
            "Write to a new array; a block would read voxels its neighbour already changed.")
    else:
        dst = resolve(s["output"], base)
        found, why = zarr_array_shape(dst)
        if found is None and why != "it does not exist":
            bad("output", f"output array {dst} exists but cannot be reused: {why}",
                "Delete it, or set 'output' to a new array.")

    block = s["block_shape"]
    dims = len(shape) if shape else (len(block) if isinstance(block, (list, tuple)) else 0)
    example = [64] * (dims or 2)
    blocks = None
    if not isinstance(block, (list, tuple)):
        bad("block_shape", f"block_shape {_show(block)} is not a list with one size per axis",
            f"Give one whole number of voxels per axis, e.g. {example}.")
    elif dims and len(block) != dims:
        bad("block_shape", f"block_shape {_show(block)} has {len(block)} size(s) but the input "
            f"has {dims} axes", f"Give {dims} whole numbers, e.g. {example}.")
    else:
        blocks = _per_axis(block, dims)
        if blocks is None or not blocks or any(b < 1 for b in blocks):
            bad("block_shape", f"block_shape {_show(block)} is not one whole number of voxels "
                "(1 or more) per axis", f"Give {dims or 'one'} whole number(s), e.g. {example}.")
            blocks = None
        elif shape and any(b > n for b, n in zip(blocks, shape)):
            axis = next(i for i, (b, n) in enumerate(zip(blocks, shape)) if b > n)
            bad("block_shape", f"block_shape {blocks} is larger than the input {list(shape)} "
                f"along axis {axis}", f"Use blocks no larger than the array, e.g. "
                f"{[min(64, n) for n in shape]}.")
            blocks = None
    if shape and blocks:
        count = math.prod(-(-n // b) for n, b in zip(shape, blocks))
        if count > MAX_BLOCKS:
            bad("block_shape", f"block_shape {blocks} cuts the input into {count:,} blocks, more "
                f"than the {MAX_BLOCKS:,} a tracking store keeps",
                "Use larger blocks (each block should take a second or more of work).")
            blocks = None
    v["blocks"] = blocks

    raw_context = s["context"]
    listed = isinstance(raw_context, (list, tuple))
    context = _per_axis(raw_context, dims or (len(raw_context) if listed else 1))
    if listed and dims and len(raw_context) != dims:
        bad("context", f"context {_show(raw_context)} has {len(raw_context)} size(s) but the "
            f"input has {dims} axes", f"Give one number for every axis, or {dims} numbers.")
    elif context is None or any(c < 0 for c in context):
        bad("context", f"context {_show(raw_context)} is not a whole number of voxels "
            f"(0 or more){' per axis' if listed else ''}",
            "Give a whole number of voxels (or one per axis), 0 for none.")
        context = None
    elif shape and any(c > n for c, n in zip(context, shape)):
        axis = next(i for i, (c, n) in enumerate(zip(context, shape)) if c > n)
        bad("context", f"context {_show(raw_context)} reaches further than the whole input "
            f"({shape[axis]} voxels along axis {axis})",
            f"Give at most {shape[axis] if listed else min(shape)} voxels of context "
            f"{'along axis ' + str(axis) + ' ' if listed else ''}(read around each block; 0 for none).")
        context = None
    v["context"] = context

    function, op = s["function"], s["operation"]
    if function:
        module, _, name = function.partition(":")
        if not module.strip() or not name.strip():
            bad("function", f"function {function!r} is not of the form package.module:function",
                "Write it like 'mylab.steps:segment'.")
    elif op not in OPERATIONS and "operation" not in not_text:
        bad("operation", f"operation {op!r} is not a built-in operation",
            f"Use one of {', '.join(OPERATIONS)}, or set 'function' to package.module:function.")
    v["function"], v["operation"] = function, op

    sigma = _real(s["sigma"])
    if sigma is None or sigma <= 0:
        bad("sigma", f"sigma {_show(s['sigma'])} is not a positive number",
            "Give sigma in voxels, e.g. 2.")
        sigma = None
    elif op == "gaussian" and not function and shape and gaussian_radius(sigma) > max(shape):
        bad("sigma", f"sigma {sigma:g} needs {gaussian_radius(sigma):,} voxels of context around "
            f"each block, more than the whole input ({max(shape)} voxels)",
            f"Give a sigma of at most {max(shape) / 3:g} voxels.")
        sigma = None
    v["sigma"] = sigma
    level = _real(s["level"])
    if level is None:
        bad("level", f"level {_show(s['level'])} is not a number",
            "Give the threshold as a number, e.g. 0.5.")
    v["level"] = level
    if op == "downsample" and not function and blocks and any(b % 2 for b in blocks):
        bad("block_shape", f"downsample needs an even block_shape, not {blocks}",
            "Use even sizes, e.g. [64, 64].")

    v["dtype"] = None
    if s["dtype"]:
        import numpy as np
        try:
            kind = np.dtype(s["dtype"]).kind
        except (TypeError, ValueError):
            kind = None
        if kind is None:
            bad("dtype", f"dtype {s['dtype']!r} is not a data type numpy knows",
                "Use e.g. float32, float64, uint8, uint16 or int32, or leave it empty for the "
                "operation's default.")
        elif kind not in _DTYPE_KINDS:
            bad("dtype", f"dtype {s['dtype']!r} cannot hold voxel values",
                "Use a number type, e.g. float32, uint8 or int32, or bool.")
        else:
            v["dtype"] = np.dtype(s["dtype"]).name

    workers = _whole(s["num_workers"])
    if workers is None or not 1 <= workers <= MAX_WORKERS:
        bad("num_workers", f"num_workers {_show(s['num_workers'])} is not a whole number "
            f"from 1 to {MAX_WORKERS}", "Give 1 or more worker processes, e.g. 2.")
    v["num_workers"] = workers
    retries = _whole(s["max_retries"])
    if retries is None or not 0 <= retries <= MAX_RETRIES:
        bad("max_retries", f"max_retries {_show(s['max_retries'])} is not a whole number "
            f"from 0 to {MAX_RETRIES}", "Give how many extra attempts a failing block gets, e.g. 2.")
    v["max_retries"] = retries
    timeout = s["timeout"]
    if timeout in (None, ""):
        v["timeout"] = None
    else:
        v["timeout"] = _real(timeout)
        if v["timeout"] is None or v["timeout"] <= 0:
            bad("timeout", f"timeout {_show(timeout)} is not a positive number of seconds",
                "Give the seconds a block may take, e.g. 600, or null for no limit.")
    tracking = s["resource_tracking"]
    if not isinstance(tracking, bool) and tracking not in (0, 1):
        bad("resource_tracking", f"resource_tracking {_show(tracking)} is not true or false",
            "Give true to measure every block, false not to.")
    v["resource_tracking"] = bool(tracking) if tracking in (True, False, 0, 1) else True
    from spacrq.blockwise.clusters import check_executor  # dask: scheduler / cluster checks
    for setting, message, fix, severity in check_executor(s, settings):
        bad(setting, message, fix, WARNING if severity == "warning" else ERROR)
    tid = s["task_id"]
    if tid:
        from spacrq.blockwise.task import SAFE_ID
        if not SAFE_ID.match(tid):
            bad("task_id", f"task_id {tid!r} cannot be a folder name",
                "Use letters, digits, '.', '_' and '-' only.")
    up = s["upstream"]
    if up is None:
        up = []
    if not isinstance(up, (list, tuple)) or not all(isinstance(u, str) for u in up):
        bad("upstream", f"upstream {_show(up)} is not a list of task ids",
            "Give the task ids of earlier steps in a list, e.g. [\"smooth\"], or [] for none.")
    return out, v


