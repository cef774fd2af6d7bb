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

A spec file (``spacrq blockwise run SPEC``) is ``{"tasks": [step, ...]}``;
docs/blockwise.md describes every setting, its range and an example.
Relative paths resolve against ``base`` (the spec's folder, or the job's
working folder).

Validate at the door: :func:`problems` (the checks live in
:mod:`~spacrq.blockwise.spec_check`) refuses a step that would fail on every
block before any worker starts, each problem naming the setting and the fix.
The spec file is read with the run-file protocol's one strict reader, so a
garbled file is a sentence naming it (and the setting where it broke), never
a traceback.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from spacrq.blockwise.ops import OPERATIONS, block_function, gaussian_radius, output_dtype
from spacrq.blockwise.spec_check import (FORMAT_HELP, MAX_AXES, MAX_BLOCKS, MAX_META_BYTES,
                                         MAX_RETRIES, MAX_WORKERS, check_step, resolve,
                                         zarr_array_shape)
from spacrq.problems import ERROR, Problem
from spacrq.runfiles import RunFileError, read_json

__all__ = ["DEFAULTS", "HELP", "problems", "build_task", "build_tasks", "load_spec", "SpecError",
           "tracking_folder", "output_folder", "MAX_WORKERS", "MAX_RETRIES", "MAX_BLOCKS",
           "MAX_AXES"]

DEFAULTS: dict[str, Any] = {
    "task_id": "", "input": "", "output": "", "block_shape": [64, 64], "context": 0,
    "operation": "gaussian", "sigma": 1.0, "level": 0.5, "function": "", "dtype": "",
    "num_workers": 2, "resource_tracking": True, "tracking": "", "max_retries": 2,
    "timeout": None, "executor": "local", "scheduler": "", "cluster": None, "upstream": [],
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
    "executor": "local (worker processes), serial (in the job's process, for debugging) or dask",
    "scheduler": "dask: address of a running scheduler, e.g. tcp://head:8786",
    "cluster": "dask: a cluster started for the job: \"local\", or {\"kind\": \"slurm\", "
               "\"cores\": 8, \"memory\": \"16GB\", \"jobs\": 4, ...} (pbs, lsf alike)",
}


class SpecError(ValueError):
    """A spec that cannot be run; the message is one sentence with the fix."""


def problems(settings: dict, base: Path, job_id: str = "",
             upstream_outputs: set[str] = frozenset()) -> list[Problem]:
    """Every problem with one step's settings, checked without running it."""
    if not isinstance(settings, dict):
        return [Problem(job_id, ERROR, f"a step is {str(settings)[:60]!r}, not a set of settings",
                        f"Write each step as an object, e.g. {{\"input\": \"raw.zarr\", "
                        f"\"output\": \"smooth.zarr\"}} ({FORMAT_HELP}).")]
    return check_step(settings, DEFAULTS, base, job_id, upstream_outputs)[0]


def task_id_of(settings: dict) -> str:
    s = {**DEFAULTS, **settings}
    if s.get("task_id") and isinstance(s["task_id"], str):
        return s["task_id"]
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
        return resolve(s["tracking"], base)
    output = resolve(s["output"], base)
    ws = _workspace_of(output.parent)
    if ws is not None:
        return ws / "runs" / task_id_of(s)
    return output.with_name(output.name + ".tracking")


def output_folder(settings: dict, base: Path) -> Path:
    return resolve({**DEFAULTS, **settings}["output"], base)


def _refuse(found: list[Problem]) -> None:
    errors = [p for p in found if p.is_error]
    if errors:
        raise SpecError("; ".join(f"{p.job_id + ': ' if p.job_id else ''}{p.message} ({p.fix})"
                                  for p in errors))


def build_task(settings: dict, base: Path, upstream=()):
    """The :class:`~spacrq.blockwise.task.Task` for one valid step; creates its output array.

    The output array is created with chunks equal to the written block (so no
    two blocks ever write the same chunk) or reused when it already has the
    same shape, chunks and dtype — a resumed job writes into it again.

    :raises SpecError: the step has a problem (the same sentences as :func:`problems`).
    """
    from spacrq.blockwise.roi import Roi
    from spacrq.blockwise.task import Task

    s = {**DEFAULTS, **settings}
    found, v = check_step(settings, DEFAULTS, base, task_id_of(s))
    _refuse(found)
    src = resolve(s["input"], base)
    dst = resolve(s["output"], base)
    shape = v["shape"]
    dims = len(shape)
    blocks, context = v["blocks"], v["context"]
    function = v["function"]
    op = function or v["operation"]
    scale = 1
    if not function and op == "gaussian":
        need = gaussian_radius(v["sigma"])
        context = [max(c, need) for c in context]
    if not function and op == "downsample":
        scale, context = 2, [0] * dims
    total = Roi([-c for c in context], [n + 2 * c for n, c in zip(shape, context)])
    read = Roi([0] * dims, [b + 2 * c for b, c in zip(blocks, context)])
    write = Roi(context, blocks)
    out_shape = tuple(n // scale for n in shape)
    out_chunks = tuple(max(1, b // scale) for b in blocks)
    dtype = output_dtype(op if not function else "", v["dtype"])
    _ensure_output(dst, out_shape, out_chunks, dtype)
    params = {"sigma": v["sigma"], "level": v["level"], "scale": scale}
    fn = block_function(op, str(src), str(dst), **params)
    return Task(task_id_of(s), total, read, write, fn, read_write_conflict=False,
                fit="shrink", num_workers=v["num_workers"], max_retries=v["max_retries"],
                timeout=v["timeout"], upstream_tasks=tuple(upstream),
                tracking_path=tracking_folder(s, base), resource_tracking=v["resource_tracking"],
                writes=_real_path(dst))


def _real_path(path: Path) -> str:
    """``path`` however spelled (``./o.zarr``, through a link): what the store records."""
    import os
    return os.path.realpath(path)


def _ensure_output(path: Path, shape, chunks, dtype) -> None:
    import numpy as np
    import zarr

    found, why = zarr_array_shape(path)
    if found is None and why != "it does not exist":
        raise SpecError(f"output array {path} exists but cannot be reused: {why}; delete it or "
                        "choose another output")
    try:
        if found is not None:
            arr = zarr.open_array(str(path), mode="r")
            have = (tuple(arr.shape), tuple(arr.chunks), np.dtype(arr.dtype))
            if have != (tuple(shape), tuple(chunks), np.dtype(dtype)):
                raise SpecError(f"output array {path} exists with shape {have[0]}, chunks "
                                f"{have[1]}, {have[2]} but this step writes {tuple(shape)}, "
                                f"{tuple(chunks)}, {dtype}; delete it or choose another output")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=dtype, fill_value=0)
    except SpecError:
        raise
    except OSError as exc:
        raise SpecError(f"output array {path} cannot be written ({exc.strerror or exc}); check "
                        "that its folder is writable, or choose another output") from None
    except Exception as exc:  # zarr refuses metadata it cannot use in many ways
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise SpecError(f"output array {path} exists but zarr cannot open it ({reason}); delete "
                        "it or choose another output") from None


def _near(path: Path, offset: int | None) -> str:
    """The setting written just before where the strict reader stopped in a spec file.

    Only words for the message (the file is refused either way): an operator
    told "near block_shape" finds ``1e400`` at once; the reader's own message
    already gives the line and column.
    """
    import re

    if offset is None:
        return ""
    try:
        with open(path, "rb") as handle:
            text = handle.read(offset).decode("utf-8", errors="replace")
    except OSError:
        return ""
    keys = re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:', text)
    return f" (the problem is near the setting {keys[-1]!r})" if keys else ""


_MISSING = object()


def load_spec(path: Path) -> list[dict]:
    """The steps of a spec file, or SpecError with one sentence."""
    path = Path(path)
    if path.is_dir():
        raise SpecError(f"spec {path} is a folder; give the path of a JSON spec file")
    try:
        doc = read_json(path, _MISSING, max_bytes=MAX_META_BYTES * 16)
    except RunFileError as exc:
        raise SpecError(f"spec {exc}{_near(path, exc.offset)}") from None
    if doc is _MISSING and not path.exists():
        raise SpecError(f"spec {path} does not exist; give the path of a JSON spec file")
    if doc is _MISSING:
        raise SpecError(f"spec {path} is empty; write its steps as {{\"tasks\": [...]}} "
                        f"({FORMAT_HELP})")
    steps = doc.get("tasks") if isinstance(doc, dict) else None
    if not isinstance(steps, list) or not steps or not all(isinstance(t, dict) for t in steps):
        raise SpecError(f"spec {path} needs a non-empty \"tasks\" list of step objects, e.g. "
                        "{\"tasks\": [{\"input\": \"raw.zarr\", \"output\": \"smooth.zarr\", "
                        f"\"block_shape\": [64, 64]}}]}}; {FORMAT_HELP}")
    return steps


def _changes_scale(step: dict) -> bool:
    """True when a step's output is on a coarser grid than its input."""
    s = {**DEFAULTS, **step}
    op = s.get("operation")
    return (not s.get("function") and isinstance(op, str)
            and OPERATIONS.get(op, {}).get("scale", 1) != 1)


def _shared_folder(steps: list[dict], ids: list[str], base: Path) -> str | None:
    """The sentence refusing two steps that write one output or keep one tracking store.

    Two steps writing one array overwrite each other's blocks; two sharing a
    store would each take the other's done marks for their own and skip them.
    """
    import os
    for what, folder_of, fix in (("output", output_folder, "output"),
                                 ("tracking store", tracking_folder, "tracking")):
        seen: dict[str, str] = {}
        for step, tid in zip(steps, ids):
            if not isinstance(step.get("output"), str) or not isinstance(step.get("tracking", ""), str):
                continue  # check_step says what is wrong with it
            where = os.path.realpath(folder_of(step, base))
            if where in seen:
                return (f"steps {seen[where]!r} and {tid!r} both use the {what} {where}; "
                        f"give each step its own '{fix}'")
            seen[where] = tid
    return None


def build_tasks(steps: list[dict], base: Path) -> list:
    """Tasks for every step, upstream links resolved by task id; SpecError on any problem."""
    ids = [task_id_of(s) for s in steps]
    if len(set(ids)) != len(ids):
        raise SpecError("two steps share a task_id; give each step its own 'task_id'")
    shared = _shared_folder(steps, ids, base)
    if shared:
        raise SpecError(shared)
    outputs = {str(output_folder(s, base)) for s in steps
               if s.get("output") and isinstance(s.get("output"), str)}
    found: list[Problem] = []
    for step, tid in zip(steps, ids):
        found.extend(problems(step, base, job_id=tid, upstream_outputs=outputs))
        upstream = step.get("upstream") or []
        for up in upstream if isinstance(upstream, list) else []:
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
    _refuse(found)
    tasks: dict[str, Any] = {}
    for step, tid in zip(steps, ids):
        tasks[tid] = build_task(step, base, upstream=[tasks[u] for u in step.get("upstream") or []])
    return list(tasks.values())
