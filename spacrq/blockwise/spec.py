"""Blockwise steps described as settings: the queue module's and the CLI spec's format.

One step (one task) is a dict::

    {"task_id": "smooth",              # default: the output array's folder name
     "input": "data/raw.zarr",         # a zarr array (folder with zarr.json / .zarray)
     "output": "data/smooth.zarr",     # created with chunks = block_shape (or reused)
     "block_shape": [64, 64],
     "context": 8,                     # voxels read around each block (int or per axis)
     "operation": "gaussian",          # gaussian | threshold | downsample
     "sigma": 2.0, "level": 0.5,       # operation parameters
     "function": "",                   # or "package.module:function" (data, block) -> array
     "num_workers": 2, "resource_tracking": true,
     "tracking": "",                   # default: <workspace>/runs/<task_id>, else <output>.tracking
     "max_retries": 2, "timeout": null, "executor": "local",
     "upstream": []}                   # task ids of this spec whose output this step reads

A spec file (``spacrq blockwise run SPEC``) is ``{"tasks": [step, ...]}``.
Relative paths resolve against ``base`` (the spec's folder, or the job's
working folder).  Everything that can be checked without running is checked
by :func:`problems`, each problem naming the setting and the fix.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spacrq.blockwise.ops import OPERATIONS, block_function, gaussian_radius, output_dtype
from spacrq.problems import ERROR, Problem

__all__ = ["DEFAULTS", "HELP", "problems", "build_task", "build_tasks", "load_spec", "SpecError",
           "tracking_folder", "output_folder"]

DEFAULTS: dict[str, Any] = {
    "task_id": "", "input": "", "output": "", "block_shape": [64, 64], "context": 0,
    "operation": "gaussian", "sigma": 1.0, "level": 0.5, "function": "", "dtype": "",
    "num_workers": 2, "resource_tracking": True, "tracking": "", "max_retries": 2,
    "timeout": None, "executor": "local", "upstream": [],
}

HELP: dict[str, str] = {
    "input": "zarr array to read (a folder holding zarr.json)",
    "output": "zarr array to write; created with chunks matching block_shape",
    "block_shape": "voxels per block along each axis, e.g. [64, 64]",
    "context": "voxels read around each block (int, or one per axis); gaussian needs 3*sigma",
    "operation": "built-in: gaussian, threshold or downsample",
    "sigma": "gaussian: smoothing width in voxels",
    "level": "threshold: values above it become 1",
    "function": "instead of operation: package.module:function taking (data, block)",
    "dtype": "output data type (default: float32, uint8 for threshold)",
    "num_workers": "worker processes",
    "resource_tracking": "measure wall, CPU, memory and IO of every block",
    "tracking": "tracking store folder (default: workspace runs/<task_id>, else <output>.tracking)",
    "max_retries": "extra attempts for a failing block",
    "timeout": "seconds a block may take before its worker is stopped",
    "executor": "local (worker processes) or serial (in the job's process, for debugging)",
}


class SpecError(ValueError):
    """A spec that cannot be run; the message is one sentence with the fix."""


def _resolve(path: str, base: Path) -> Path:
    p = Path(str(path)).expanduser()
    return p if p.is_absolute() else base / p


def _zarr_array_shape(path: Path) -> tuple[tuple[int, ...] | None, str]:
    """``(shape, "")`` of the zarr array at ``path``, or ``(None, why not)``."""
    meta = path / "zarr.json"
    if meta.is_file():
        try:
            doc = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return None, f"its zarr.json cannot be read ({exc})"
        if doc.get("node_type") != "array":
            return None, "it is a zarr group, not an array; name the array inside it"
        return tuple(int(s) for s in doc.get("shape", ())), ""
    v2 = path / ".zarray"
    if v2.is_file():
        try:
            return tuple(int(s) for s in json.loads(v2.read_text())["shape"]), ""
        except (OSError, ValueError, KeyError) as exc:
            return None, f"its .zarray cannot be read ({exc})"
    if path.exists():
        return None, "it is not a zarr array (no zarr.json)"
    return None, "it does not exist"


def _per_axis(value: Any, dims: int) -> list[int] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and int(value) == value:
        return [int(value)] * dims
    if isinstance(value, (list, tuple)) and len(value) == dims and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and int(v) == v for v in value):
        return [int(v) for v in value]
    return None


def problems(settings: dict, base: Path, job_id: str = "", upstream_outputs: set[str] = frozenset()) -> list[Problem]:
    """Every problem with one step's settings, checked without running it."""
    s = {**DEFAULTS, **settings}
    out: list[Problem] = []

    def bad(setting: str, message: str, fix: str) -> None:
        out.append(Problem(job_id, ERROR, message, fix, setting=setting))

    block = s.get("block_shape")
    shape = None
    if not s.get("input"):
        bad("input", "no input array is given", "Set 'input' to the zarr array to process.")
    else:
        src = _resolve(s["input"], base)
        shape, why = _zarr_array_shape(src)
        if shape is None and not (why == "it does not exist" and str(src) in upstream_outputs):
            bad("input", f"input array {src} cannot be used: {why}",
                "Point 'input' at an existing zarr array (the folder holding zarr.json).")
    if not s.get("output"):
        bad("output", "no output array is given", "Set 'output' to the zarr array to write.")
    elif s.get("input") and _resolve(s["output"], base) == _resolve(s["input"], base):
        bad("output", "output is the same array as input",
            "Write to a new array; a block would read voxels its neighbour already changed.")
    dims = len(shape) if shape else (len(block) if isinstance(block, (list, tuple)) else 0)
    blocks = _per_axis(block, dims) if dims else None
    if not blocks or any(b <= 0 for b in blocks) or isinstance(block, (int, float)):
        bad("block_shape", f"block_shape {block!r} is not one positive size per axis of the input",
            f"Give {dims or 'one'} whole number(s), e.g. {[64] * (dims or 2)}.")
        blocks = None
    context = _per_axis(s.get("context", 0), dims) if dims else None
    if context is None or any(c < 0 for c in context):
        bad("context", f"context {s.get('context')!r} is not a size per axis",
            "Give a whole number of voxels (or one per axis), 0 for none.")
    function = str(s.get("function") or "")
    op = str(s.get("operation") or "")
    if function:
        if ":" not in function:
            bad("function", f"function {function!r} is not of the form package.module:function",
                "Write it like 'mylab.steps:segment'.")
    elif op not in OPERATIONS:
        bad("operation", f"operation {op!r} is not a built-in operation",
            f"Use one of {', '.join(OPERATIONS)}, or set 'function' to package.module:function.")
    if op == "gaussian" and not function:
        try:
            sigma = float(s.get("sigma"))
            if sigma <= 0:
                raise ValueError
        except (TypeError, ValueError):
            bad("sigma", f"sigma {s.get('sigma')!r} is not a positive number", "Give sigma in voxels, e.g. 2.")
    if op == "downsample" and not function and blocks and any(b % 2 for b in blocks):
        bad("block_shape", "downsample needs an even block_shape", "Use even sizes, e.g. [64, 64].")
    if shape and blocks and any(b > n for b, n in zip(blocks, shape)):
        bad("block_shape", f"block_shape {blocks} is larger than the input {list(shape)}",
            "Use blocks no larger than the array.")
    try:
        if int(s.get("num_workers", 1)) < 1:
            raise ValueError
    except (TypeError, ValueError):
        bad("num_workers", f"num_workers {s.get('num_workers')!r} is not a positive whole number",
            "Give 1 or more.")
    if s.get("executor", "local") not in ("local", "serial"):
        bad("executor", f"executor {s.get('executor')!r} is not local or serial", "Use local or serial.")
    tid = s.get("task_id") or ""
    if tid:
        from spacrq.blockwise.task import SAFE_ID
        if not SAFE_ID.match(str(tid)):
            bad("task_id", f"task_id {tid!r} cannot be a folder name",
                "Use letters, digits, '.', '_' and '-' only.")
    return out


def task_id_of(settings: dict) -> str:
    s = {**DEFAULTS, **settings}
    if s.get("task_id"):
        return str(s["task_id"])
    name = Path(str(s.get("output") or "blockwise")).name
    for suffix in (".zarr", ".zarray"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name).lstrip(".") or "blockwise"


def _workspace_of(path: Path) -> Path | None:
    for folder in [path, *path.parents]:
        if (folder / "workspace.json").is_file():
            return folder
    return None


def tracking_folder(settings: dict, base: Path) -> Path:
    s = {**DEFAULTS, **settings}
    if s.get("tracking"):
        return _resolve(s["tracking"], base)
    output = _resolve(s["output"], base)
    ws = _workspace_of(output.parent)
    if ws is not None:
        return ws / "runs" / task_id_of(s)
    return output.with_name(output.name + ".tracking")


def output_folder(settings: dict, base: Path) -> Path:
    return _resolve({**DEFAULTS, **settings}["output"], base)


def build_task(settings: dict, base: Path, upstream=()):
    """The :class:`~spacrq.blockwise.task.Task` for one valid step; creates its output array.

    The output array is created with chunks equal to the written block (so no
    two blocks ever write the same chunk) or reused when it already has the
    same shape, chunks and dtype — a resumed job writes into it again.
    """
    from spacrq.blockwise.roi import Roi
    from spacrq.blockwise.task import Task

    s = {**DEFAULTS, **settings}
    src = _resolve(s["input"], base)
    dst = _resolve(s["output"], base)
    shape, why = _zarr_array_shape(src)
    if shape is None:
        raise SpecError(f"input array {src} cannot be used: {why}; point 'input' at a zarr array")
    dims = len(shape)
    blocks = _per_axis(s["block_shape"], dims)
    context = _per_axis(s.get("context", 0), dims)
    function = str(s.get("function") or "")
    op = function or str(s["operation"])
    scale = 1
    if not function and op == "gaussian":
        need = gaussian_radius(float(s["sigma"]))
        context = [max(c, need) for c in context]
    if not function and op == "downsample":
        scale, context = 2, [0] * dims
    total = Roi([-c for c in context], [n + 2 * c for n, c in zip(shape, context)])
    read = Roi([0] * dims, [b + 2 * c for b, c in zip(blocks, context)])
    write = Roi(context, blocks)
    out_shape = tuple(n // scale for n in shape)
    out_chunks = tuple(max(1, b // scale) for b in blocks)
    dtype = output_dtype(op if not function else "", s.get("dtype") or None)
    _ensure_output(dst, out_shape, out_chunks, dtype)
    params = {"sigma": float(s["sigma"]), "level": float(s["level"]), "scale": scale}
    fn = block_function(op, str(src), str(dst), **params)
    return Task(task_id_of(s), total, read, write, fn, read_write_conflict=False,
                fit="shrink", num_workers=int(s["num_workers"]), max_retries=int(s["max_retries"]),
                timeout=s.get("timeout"), upstream_tasks=tuple(upstream),
                tracking_path=tracking_folder(s, base), resource_tracking=bool(s["resource_tracking"]))


def _ensure_output(path: Path, shape, chunks, dtype) -> None:
    import numpy as np
    import zarr

    found, _ = _zarr_array_shape(path)
    if found is not None:
        arr = zarr.open_array(str(path), mode="r")
        if (tuple(arr.shape) != tuple(shape) or tuple(arr.chunks) != tuple(chunks)
                or np.dtype(arr.dtype) != np.dtype(dtype)):
            raise SpecError(f"output array {path} exists with shape {tuple(arr.shape)}, chunks "
                            f"{tuple(arr.chunks)}, {arr.dtype} but this step writes {tuple(shape)}, "
                            f"{tuple(chunks)}, {dtype}; delete it or choose another output")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=dtype, fill_value=0)


def load_spec(path: Path) -> list[dict]:
    """The steps of a spec file, or SpecError with one sentence."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"spec {path} does not exist; give the path of a JSON spec file") from None
    except (OSError, ValueError) as exc:
        raise SpecError(f"spec {path} is not readable JSON ({exc}); fix the file") from None
    steps = doc.get("tasks") if isinstance(doc, dict) else None
    if not isinstance(steps, list) or not steps or not all(isinstance(t, dict) for t in steps):
        raise SpecError(f"spec {path} needs a non-empty \"tasks\" list of step objects; "
                        "see docs/blockwise.md for the format")
    return steps


def _changes_scale(step: dict) -> bool:
    """True when a step's output is on a coarser grid than its input."""
    s = {**DEFAULTS, **step}
    return not s.get("function") and OPERATIONS.get(s.get("operation"), {}).get("scale", 1) != 1


def build_tasks(steps: list[dict], base: Path) -> list:
    """Tasks for every step, upstream links resolved by task id; SpecError on any problem."""
    ids = [task_id_of(s) for s in steps]
    if len(set(ids)) != len(ids):
        raise SpecError("two steps share a task_id; give each step its own 'task_id'")
    outputs = {str(output_folder(s, base)) for s in steps if s.get("output")}
    found: list[Problem] = []
    for step, tid in zip(steps, ids):
        found.extend(problems(step, base, job_id=tid, upstream_outputs=outputs))
        for up in step.get("upstream") or []:
            if up not in ids or ids.index(up) >= ids.index(tid):
                found.append(Problem(tid, ERROR, f"upstream task {up!r} is not an earlier step",
                                     "List only task ids of steps above this one.", "upstream"))
            elif _changes_scale(steps[ids.index(up)]):
                # Block dependencies are matched voxel for voxel; across a change of scale
                # they would wait for the wrong upstream blocks.
                found.append(Problem(
                    tid, ERROR, f"upstream task {up!r} downsamples, so its output is on another "
                    "voxel grid than the one this step's blocks are matched against",
                    f"Run {tid!r} as its own queue job after the one holding {up!r} "
                    "(queue 'after'), instead of listing it as upstream.", "upstream"))
    if found:
        raise SpecError("; ".join(f"{p.job_id}: {p.message} ({p.fix})" for p in found))
    tasks: dict[str, Any] = {}
    for step, tid in zip(steps, ids):
        tasks[tid] = build_task(step, base, upstream=[tasks[u] for u in step.get("upstream") or []])
    return list(tasks.values())
