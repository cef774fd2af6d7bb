"""Just enough zarr v3 to keep a tracking store, without importing zarr.

The scheduler must be quick off the mark: importing the zarr library costs
the better part of a second (more on a busy machine) and every chunk write
goes through its async machinery.  The tracking store needs only a tiny,
fixed corner of the format — regular chunk grid, C order, ``bytes`` then
``gzip`` codecs, ``/``-separated chunk keys — so it is written here directly.
The files are ordinary zarr v3: the zarr library, the Run Report pane and any
other reader open them as usual.  A store written by the zarr library with
other codecs is read through the library instead (:func:`read_array` falls
back to it).

Chunk files are replaced atomically (temp file, fsync, ``os.replace``), so a
crash leaves each chunk old or new, never torn.
"""
from __future__ import annotations

import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from spacrq.runfiles import RunFileError, dumps, read_json, write_bytes

__all__ = ["create_group", "read_group_attrs", "create_array", "array_meta", "read_array",
           "write_chunk", "ZarrFormatError", "LEVEL"]

LEVEL = 1  # gzip level: tracking arrays compress well even at the fastest setting
MAX_META_BYTES = 1 << 20  # a node's zarr.json is a few hundred bytes
MAX_ELEMENTS = 1 << 30  # a whole array read into memory; tracking arrays hold one entry a block


class ZarrFormatError(ValueError):
    """The folder is not a zarr v3 node this module can read."""


def _fill_json(dtype: np.dtype, fill: Any) -> Any:
    if dtype.kind == "b":
        return bool(fill)
    if dtype.kind == "f":
        return "NaN" if math.isnan(fill) else float(fill)
    return int(fill)


def _fill_value(dtype: np.dtype, doc: Any) -> Any:
    special = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
    if isinstance(doc, str) and doc in special:
        return special[doc]
    if isinstance(doc, (bool, int, float)):
        try:
            return np.asarray(doc).astype(dtype)
        except (OverflowError, ValueError):
            pass
    raise ZarrFormatError(f"the fill value {str(doc)[:40]!r} does not fit the data type {dtype}")


def _write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    write_bytes(path, data, durable=durable)


def _write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_bytes(path, (dumps(doc, indent=2) + "\n").encode())


def create_group(path: Path, attributes: dict) -> None:
    _write_json(Path(path) / "zarr.json", {"zarr_format": 3, "node_type": "group",
                                           "attributes": attributes})


def read_group_attrs(path: Path) -> dict:
    doc = _read_meta(Path(path))
    if doc.get("node_type") != "group":
        raise ZarrFormatError(f"{path} is a zarr {doc.get('node_type')}, not a group")
    attrs = doc.get("attributes")
    return attrs if isinstance(attrs, dict) else {}


def _read_meta(path: Path) -> dict:
    """A node's zarr.json, read with the run-file protocol's strict reader.

    Garbage, a list, ``NaN``, a folder in the file's place: each is a
    ZarrFormatError naming the file, never a ``UnicodeDecodeError`` or an
    ``AttributeError`` further on.
    """
    meta = path / "zarr.json"
    try:
        doc = read_json(meta, None, expect=dict, max_bytes=MAX_META_BYTES)
    except RunFileError as exc:
        raise ZarrFormatError(str(exc)) from None
    if doc is None:
        raise ZarrFormatError(f"{meta} is missing or empty")
    if doc.get("zarr_format") != 3:
        raise ZarrFormatError(f"{meta} is not zarr v3 metadata")
    return doc


def _whole_list(value: Any, low: int) -> bool:
    return (isinstance(value, list) and 0 < len(value) <= 64
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= low for v in value))


def create_array(path: Path, shape, chunks, dtype: str, fill: Any) -> None:
    dt = np.dtype(dtype)
    bytes_codec: dict[str, Any] = {"name": "bytes"}
    if dt.itemsize > 1:
        bytes_codec["configuration"] = {"endian": "little"}
    _write_json(Path(path) / "zarr.json", {
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dt.name,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": _fill_json(dt, fill),
        "codecs": [bytes_codec, {"name": "gzip", "configuration": {"level": LEVEL}}],
        "attributes": {}, "storage_transformers": [],
    })


def array_meta(path: Path) -> dict:
    """An array's metadata, checked far enough that reading it cannot trip on its shape."""
    doc = _read_meta(Path(path))
    meta = Path(path) / "zarr.json"
    if doc.get("node_type") != "array":
        raise ZarrFormatError(f"{path} is not a zarr array")
    if not _whole_list(doc.get("shape"), 0):
        raise ZarrFormatError(f"{meta} has no valid \"shape\" (one whole number per axis)")
    try:
        np.dtype(doc.get("data_type"))
    except (TypeError, ValueError):
        raise ZarrFormatError(f"{meta} names the data type {doc.get('data_type')!r}, which "
                              "numpy does not know") from None
    grid = doc.get("chunk_grid")
    chunks = (grid.get("configuration") or {}).get("chunk_shape") if isinstance(grid, dict) else None
    if not _whole_list(chunks, 1) or len(chunks) != len(doc["shape"]):
        raise ZarrFormatError(f"{meta} has no valid chunk shape (one whole number of 1 or more "
                              "per axis)")
    codecs = doc.get("codecs")
    if not isinstance(codecs, list) or not all(isinstance(c, dict) for c in codecs):
        raise ZarrFormatError(f"{meta} has no valid \"codecs\" list")
    return doc


def _own_codecs(doc: dict) -> bool:
    names = [c.get("name") for c in doc.get("codecs", [])]
    config = doc["codecs"][0].get("configuration") if names else None
    endian = (config if isinstance(config, dict) else {}).get("endian", "little") if names else None
    keys = doc.get("chunk_key_encoding")
    keys = keys if isinstance(keys, dict) else {}
    key_config = keys.get("configuration") if isinstance(keys.get("configuration"), dict) else {}
    return (names in (["bytes"], ["bytes", "gzip"]) and endian == "little"
            and key_config.get("separator", "/") == "/" and keys.get("name") == "default")


def read_array(path: Path) -> np.ndarray:
    """The whole array; chunks never written read as the fill value."""
    path = Path(path)
    doc = array_meta(path)
    if not _own_codecs(doc):
        import zarr  # written by someone else: let the library decode it
        return np.asarray(zarr.open_array(str(path), mode="r")[...])
    dtype = np.dtype(doc["data_type"]).newbyteorder("<")
    shape = tuple(doc["shape"])
    chunks = tuple(doc["chunk_grid"]["configuration"]["chunk_shape"])
    gz = len(doc["codecs"]) > 1
    if math.prod(shape) > MAX_ELEMENTS:
        raise ZarrFormatError(f"{path / 'zarr.json'} gives the shape {list(shape)}, more entries "
                              f"than the {MAX_ELEMENTS:,} this reader holds in memory")
    out = np.full(shape, _fill_value(dtype, doc.get("fill_value")), dtype=dtype)
    counts = [-(-n // c) for n, c in zip(shape, chunks)]
    for index in np.ndindex(*counts):
        chunk_path = path.joinpath("c", *map(str, index))
        try:
            raw = chunk_path.read_bytes()
        except FileNotFoundError:
            continue
        try:
            data = zlib.decompress(raw, 31) if gz else raw
            block = np.frombuffer(data, dtype=dtype).reshape(chunks)
        except (zlib.error, ValueError) as exc:
            raise ZarrFormatError(f"chunk {chunk_path} is damaged ({exc})") from None
        sel = tuple(slice(i * c, min(n, (i + 1) * c)) for i, c, n in zip(index, chunks, shape))
        out[sel] = block[tuple(slice(0, s.stop - s.start) for s in sel)]
    return out.astype(dtype.newbyteorder("="), copy=False)


def write_chunk(path: Path, index, data: np.ndarray, chunks, fill: Any) -> None:
    """Write one chunk (``data`` is the in-bounds part; edges are padded with ``fill``)."""
    if tuple(data.shape) != tuple(chunks):
        full = np.full(chunks, fill, dtype=data.dtype)
        full[tuple(slice(0, s) for s in data.shape)] = data
        data = full
    raw = np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<")).tobytes()
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, 31)
    payload = compressor.compress(raw) + compressor.flush()
    target = Path(path).joinpath("c", *map(str, index))
    _refuse_linked_folders(Path(path), target.parent)  # before mkdir makes folders through one
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_bytes(target, payload)


def _refuse_linked_folders(array: Path, folder: Path) -> None:
    """RunFileError when a folder between ``array`` and ``folder`` is a link (planted mid-run).

    The store is checked for linked folders when a run opens it; one planted
    while the run goes (``done/c`` pointing elsewhere) would otherwise take
    the next chunk wherever it points.
    """
    here = folder
    while here != array and array in here.parents:
        if here.is_symlink():
            raise RunFileError(f"{here} is a symbolic link to a folder; spacrq does not write "
                               "through links: remove the link", here)
        here = here.parent
    if array.is_symlink():
        raise RunFileError(f"{array} is a symbolic link to a folder; spacrq does not write "
                           "through links: remove the link", array)
