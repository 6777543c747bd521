"""Progress on stderr for the CLI steps that take seconds (building models, costing, loading a plan,
rendering figures): a tqdm bar naming the step under way. ``--progress auto`` (the default) shows
it only when stderr is a terminal and the output is not ``--json``; ``always`` shows it anyway
(still on stderr: stdout stays the table or the JSON); ``never`` hides it."""
from __future__ import annotations

import argparse
import sys
from typing import Any

CHOICES = ("auto", "always", "never")


def add_progress_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", choices=CHOICES, default="auto",
                   help="progress bar on stderr: auto (when stderr is a terminal, not with --json), "
                        "always, never")


def progress_enabled(args: argparse.Namespace, stream: Any = None) -> bool:
    mode = getattr(args, "progress", "auto")
    if mode == "always":
        return True
    if mode == "never" or getattr(args, "json", False):
        return False
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Steps:
    """A bar of ``total`` steps; ``step(what)`` closes the previous step and names the next one,
    so the bar says what is running while a long step runs."""

    def __init__(self, args: argparse.Namespace, desc: str, total: int):
        from tqdm import tqdm
        self.bar = tqdm(total=total, desc=desc, unit="step", file=sys.stderr, leave=False,
                        disable=not progress_enabled(args), dynamic_ncols=True)
        self._open = False

    def step(self, what: str) -> None:
        if self._open:
            self.bar.update(1)
        self._open = True
        self.bar.set_postfix_str(what, refresh=True)

    def close(self) -> None:
        if self._open:
            self.bar.update(1)
            self._open = False
        self.bar.close()

    def __enter__(self) -> "Steps":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
