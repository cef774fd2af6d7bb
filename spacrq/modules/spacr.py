"""spaCR's headless modules, offered to the queue when spaCR is installed.

A spaCR job is a ``spacr-run`` invocation: ``python -m spacr.cli KEY
--settings FILE --set k=v …``.  spaCR owns its settings (loading, renamed
keys, coercion, pre-flight checks), so spacrq passes the settings file and
the overrides through untouched rather than second-guessing them.  Only
``spacr.cli`` is imported to list the modules; it imports nothing heavy.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
from typing import Any

from spacrq.modules import ModuleSpec
from spacrq.procs import module_argv

#: spaCR workflows whose rerun continues from verified checkpoints.
RESUMABLE = frozenset({"mask", "measure", "convert", "format_convert", "format_converter"})
_MARK = "_spacrq_spacr_key"


@functools.lru_cache(maxsize=1)
def _cli() -> Any:
    if importlib.util.find_spec("spacr") is None:
        return None
    try:
        import spacr.cli as cli
    except Exception:
        return None
    return cli


def module_names() -> list[str]:
    """spaCR's module keys, or ``[]`` when spaCR is not installed."""
    cli = _cli()
    return sorted(getattr(cli, "MODULES", {})) if cli is not None else []


def cli_argv(key: str, settings_path: str, overrides: list[str]) -> list[str]:
    """The exact ``spacr-run`` command line, in the interpreter spacrq runs in."""
    argv = module_argv("spacr.cli", key)  # the interpreter that found spaCR
    if settings_path:
        argv += ["--settings", settings_path]
    for item in overrides:
        argv += ["--set", item]
    return argv


def is_spacr(spec: ModuleSpec) -> str:
    """spaCR's key when ``spec`` is one of spaCR's modules, else ``''``."""
    return getattr(spec.run, _MARK, "")


def _src_folders(settings: dict) -> list[str]:
    src = settings.get("src")
    values = src if isinstance(src, (list, tuple)) else [src] if src else []
    out = []
    for value in values:
        out += [str(value), os.path.join(str(value), "measurements")]
    return out


def spec_for(key: str) -> ModuleSpec:
    cli = _cli()
    module = cli.MODULES[key] if cli is not None else None

    def run(settings: dict, ctx: Any) -> None:
        import json
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(settings, handle, default=str)
        try:
            code = subprocess.call(cli_argv(key, handle.name, []))
        finally:
            os.unlink(handle.name)
        if code != 0:
            raise RuntimeError(f"spacr-run {key} exited with code {code}")

    setattr(run, _MARK, key)
    return ModuleSpec(
        name=key, run=run, defaults={},
        description=f"spaCR: {getattr(module, 'summary', key)}",
        writes=_src_folders, resumable=key in RESUMABLE,
    )
