"""The ``accel-tune`` command. Each subcommand lives in its own module with ``add_parser(sub)`` and
``run(args) -> int``; errors from bad input become one line on stderr and exit status 2."""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import warnings

SUBCOMMANDS = ["models", "partition", "hw", "simulate", "tune", "run", "inspect", "sweep", "report"]


class CLIError(Exception):
    """A user-facing error: printed as one line."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="accel-tune", description="Partition, cost, tune and export models for a new accelerator.")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
        mod = importlib.import_module(f"tuner.cli.cmd_{name}")
        sp = mod.add_parser(sub)
        sp.set_defaults(_run=mod.run)
    return p


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, default=_json_default)
    sys.stdout.write("\n")


def _json_default(o):
    import numpy as np
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"accel-tune: warning: {str(message).strip().splitlines()[0]}", file=file or sys.stderr)


def entry() -> int:
    """The console script: ``main`` with the library's user-facing warnings (a truncated log line
    skipped, ...) printed as one line instead of Python's file:line and source."""
    if "--debug" not in sys.argv[1:]:
        warnings.showwarning = _one_line_warning
    return main()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("accel-tune: interrupted", file=sys.stderr)
        return 130
    except (CLIError, ValueError, OSError) as e:
        # The library reports bad input as ValueError subclasses and the OS as OSError; anything
        # else is a bug and keeps its traceback.
        if args.debug:
            raise
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"accel-tune: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(entry())
