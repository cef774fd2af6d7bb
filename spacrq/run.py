"""``python -m spacrq.run MODULE --settings FILE --set key=value …``: one job, one process.

Settings are layered defaults → file (CSV ``Key,Value`` or JSON) →
overrides, each override coerced to its default's type.  Exit codes are the
contract the queue reads:

* 0 — the module returned;
* 1 — the module raised: the traceback goes to the log (stderr) and the last
  line is ``error: ExcType: message`` so the queue can group failures;
* 2 — bad arguments or settings: one sentence naming the fix.

``--dry-run`` resolves and checks the settings and stops; ``--list`` lists
the modules; ``--describe MODULE`` says what a module takes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Sequence

from spacrq.ledger import Ledger
from spacrq.modules import ModuleError, ModuleSpec, registry, resolve_module
from spacrq.problems import format_problems
from spacrq.queue.control import Control
from spacrq.queue.settings import SettingsError, resolve_settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad arguments: one sentence, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        raise UsageError(f"{message} (see 'python -m spacrq.run --help')")


class Context:
    """What a running module gets besides its settings (see ``spacrq.modules.RunContext``)."""

    def __init__(self, name: str, workdir: str) -> None:
        self.ledger = Ledger(name)
        self.workdir = workdir
        log_path = os.environ.get("SPACRQ_JOB_LOG", "")
        self._control = Control(os.path.dirname(log_path) if log_path else None)

    def stop_requested(self) -> bool:
        """True once the operator aborted the queue: stop at the next safe boundary.

        A plain Stop lets the running job finish, so it does not count here; an
        abort is followed by SIGTERM after this, so a module that checks between
        items ends cleanly before the signal arrives.
        """
        return self._control.abort_requested()

    def log(self, message: str) -> None:
        print(message, flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m spacrq.run", description="Run one spacrq module.",
                epilog="Exit codes: 0 ok, 1 the module raised, 2 bad arguments or settings.")
    p.add_argument("module", nargs="?")
    p.add_argument("--settings", "-s", metavar="FILE", help="settings CSV (Key,Value) or JSON")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--dry-run", action="store_true", help="resolve and check, run nothing")
    p.add_argument("--list", action="store_true", help="list the modules and exit")
    p.add_argument("--describe", action="store_true", help="describe MODULE and exit")
    return p


def _spec(name: str) -> ModuleSpec:
    try:
        spec = resolve_module(name)
    except ModuleError as exc:
        raise UsageError(str(exc)) from None
    if spec is None:
        raise UsageError(f"unknown module {name!r}; run 'python -m spacrq.run --list' to see "
                         "the modules")
    return spec


def _describe(spec: ModuleSpec) -> str:
    lines = [f"{spec.name}: {spec.description}", "settings (default):"]
    for key, value in spec.defaults.items():
        hint = spec.settings_help.get(key, "")
        lines.append(f"  {key} = {json.dumps(value, default=str)}" + (f"  — {hint}" if hint else ""))
    if spec.resumable:
        lines.append("resumable: a rerun after an interruption continues where it stopped")
    return "\n".join(lines)


def _list() -> str:
    lines = []
    for name in sorted(registry()):
        try:
            spec = resolve_module(name)
            text = spec.description if spec else ""
        except ModuleError as exc:
            text = f"(cannot load: {exc})"
        lines.append(f"  {name:<14} {text}")
    return "modules:\n" + "\n".join(lines)


def _run_module(spec: ModuleSpec, settings: dict) -> int:
    ctx = Context(spec.name, os.getcwd())
    try:
        spec.run(settings, ctx)
    except KeyboardInterrupt:
        print("error: KeyboardInterrupt: interrupted", file=sys.stderr, flush=True)
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 — the module's failure is the job's verdict
        traceback.print_exc()
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    finally:
        _stamp_unstamped(spec, settings, ctx.ledger)
    return EXIT_OK


def _stamp_unstamped(spec: ModuleSpec, settings: dict, ledger: Ledger) -> None:
    """A module that recorded items but stamped nothing is stamped in its first output folder."""
    if ledger.stamped or not ledger.n_attempted:
        return
    folders = spec.output_folders(settings)
    if not folders:
        print(f"note: {spec.name} recorded {ledger.n_attempted} items but writes no folder to "
              "stamp; its partial results cannot be seen by the queue", file=sys.stderr)
        return
    os.makedirs(folders[0], exist_ok=True)
    ledger.stamp(os.path.join(folders[0], spec.name))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
        if args.list:
            print(_list())
            return EXIT_OK
        if not args.module:
            raise UsageError("name a module to run, e.g. 'python -m spacrq.run command --set "
                             "argv=[\"true\"]', or use --list")
        spec = _spec(args.module)
        if args.describe:
            print(_describe(spec))
            return EXIT_OK
        from spacrq.modules.spacr import is_spacr
        settings = resolve_settings(spec.name, spec.defaults, args.settings or "", args.set,
                                    open_keys=bool(is_spacr(spec)) or not spec.defaults)
        errors = [p for p in spec.check(settings) if p.is_error]
        if args.dry_run:
            print(json.dumps(settings, indent=2, default=str))
            print(format_problems(spec.check(settings), title=spec.name))
            return EXIT_USAGE if errors else EXIT_OK
        if errors:
            raise UsageError("; ".join(f"{p.message} (fix: {p.fix})" for p in errors))
    except (UsageError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _run_module(spec, settings)


if __name__ == "__main__":
    sys.exit(main())
