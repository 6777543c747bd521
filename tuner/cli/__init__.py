"""The ``accel-tune`` command. Each subcommand lives in its own module with ``add_parser(sub)`` and
``run(args) -> int``; errors from bad input become one line on stderr and exit status 2."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import warnings

SUBCOMMANDS = ["models", "partition", "hw", "simulate", "tune", "run", "inspect", "export", "sweep", "report",
               "calibrate", "llm"]


class CLIError(Exception):
    """A user-facing error: printed as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error as the one line every other bad input gives (argparse prints the
    usage block and its own prefix); subcommand parsers inherit the class."""

    def error(self, message: str):
        sub = self.prog.removeprefix("accel-tune").strip()
        self.exit(2, f"accel-tune: error: {f'{sub}: ' if sub else ''}{message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="accel-tune", description="Partition, cost, tune and export models for a new accelerator.")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    p.add_argument("--version", action="version", version=_version())
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


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"accel-tune {version('accel-tune')}"
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "accel-tune (not installed: no package metadata)"


def entry() -> int:
    """The console script: ``main`` with the library's user-facing warnings (a truncated log line
    skipped, an input cast, ...) printed as one line instead of Python's file:line and source; and
    a reader that stops early (``accel-tune ... | head``) ends it quietly, as it ends any Unix
    tool, instead of a BrokenPipeError traceback."""
    if "--debug" not in sys.argv[1:]:
        warnings.showwarning = _one_line_warning
    try:
        rc = main()
        sys.stdout.flush()  # inside the try: a pipe closed early fails here, not at exit
        return rc
    except BrokenPipeError:
        _silence_stdio()
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the closed pipe


def _silence_stdio() -> None:
    """Point stdout and stderr at /dev/null, so that the interpreter's final flush of the
    buffered, now unwritable pipe prints no 'Exception ignored' message."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):
            pass


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("accel-tune: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise  # the reader went away: entry() ends quietly; there is no one to report to
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
