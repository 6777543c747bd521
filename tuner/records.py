"""Tuning records: one JSON object per line, appended as each measurement finishes.

A record is keyed by the workload key, the hardware fingerprint and the schedule (its canonical
JSON), and carries the measured cycles and the name of the measurer that produced them (cycles of
different measurers are not compared: a run reuses only records of its own measurer). A process
killed mid-write leaves a truncated last line; reading skips it with a warning, and the next append
cuts it off first. A malformed line
anywhere else is an error naming the file and line, since something other than the tuner wrote it.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from sim import Schedule, ScheduleError

RECORD_VERSION = 1


class RecordsError(ValueError):
    """A tuning log that cannot be read or written."""


@dataclass(frozen=True)
class Record:
    workload_key: str
    hw_fingerprint: str
    schedule: Schedule
    cycles: float
    measurer: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.workload_key, self.hw_fingerprint, self.schedule.to_json())

    def to_json(self) -> str:
        return json.dumps({"v": RECORD_VERSION, "workload": self.workload_key, "hw": self.hw_fingerprint,
                           "schedule": self.schedule.to_dict(), "cycles": self.cycles,
                           "measurer": self.measurer}, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> "Record":
        d = json.loads(line)
        if not isinstance(d, dict) or d.get("v") != RECORD_VERSION:
            raise ValueError(f"not a version-{RECORD_VERSION} tuning record")
        cycles = d["cycles"]
        if isinstance(cycles, bool) or not isinstance(cycles, (int, float)) or not cycles > 0:
            raise ValueError(f"cycles must be a positive number, got {cycles!r}")
        return cls(str(d["workload"]), str(d["hw"]), Schedule.from_dict(d["schedule"]), float(cycles),
                   str(d["measurer"]))


def load_records(path: str | Path) -> tuple[Record, ...]:
    """Every record in a log (a missing file is an empty log)."""
    p = Path(path)
    if not p.exists():
        return ()
    try:
        text = p.read_text()
    except OSError as e:
        raise RecordsError(f"cannot read tuning log {p}: {e.strerror}") from None
    lines = text.split("\n")
    complete = text.endswith("\n")
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        last = i == len(lines) - 1
        try:
            out.append(Record.from_json(line))
        except (ValueError, KeyError, TypeError, ScheduleError) as e:
            if last and not complete:
                warnings.warn(f"tuning log {p}: skipped a truncated last line (line {i + 1})", stacklevel=2)
                continue
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise RecordsError(f"tuning log {p} line {i + 1} is not a tuning record: {msg}") from None
    return tuple(out)


def append_record(path: str | Path, record: Record) -> None:
    """Append one record and flush it to disk (a crash loses at most the line being written)."""
    p = Path(path)
    try:
        with open(p, "a+b") as f:
            _drop_truncated_tail(f)
            f.write(record.to_json().encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise RecordsError(f"cannot append to tuning log {p}: {e.strerror}") from None


def _drop_truncated_tail(f) -> None:
    """A killed run may leave a partial last line: cut it off, so it does not become an unreadable
    line in the middle of the log once the next record is appended."""
    size = f.seek(0, os.SEEK_END)
    if size == 0:
        return
    f.seek(size - 1)
    if f.read(1) == b"\n":
        return
    back = min(size, 1 << 20)
    f.seek(size - back)
    nl = f.read(back).rfind(b"\n")
    if nl >= 0 or back == size:
        f.truncate(size - back + nl + 1)
    else:  # a line longer than 1 MiB: keep it, end it
        f.write(b"\n")
    f.seek(0, os.SEEK_END)


def select(records: Iterable[Record], workload_key: str | None = None, hw_fingerprint: str | None = None,
           measurer: str | None = None) -> list[Record]:
    return [r for r in records
            if (workload_key is None or r.workload_key == workload_key)
            and (hw_fingerprint is None or r.hw_fingerprint == hw_fingerprint)
            and (measurer is None or r.measurer == measurer)]


def best_records(records: Iterable[Record], hw_fingerprint: str | None = None, measurer: str | None = None,
                 rank: Callable[[Record], Any] = lambda r: r.cycles) -> dict[str, Record]:
    """The best record of every workload (the lowest ``rank``, by default the fewest cycles; ties:
    the first measured), on one hardware when ``hw_fingerprint`` is given."""
    best: dict[str, Record] = {}
    for r in select(records, None, hw_fingerprint, measurer):
        b = best.get(r.workload_key)
        if b is None or rank(r) < rank(b):
            best[r.workload_key] = r
    return best


def best_record(records: Iterable[Record], workload_key: str, hw_fingerprint: str,
                measurer: str | None = None) -> Record | None:
    """The fastest record of one workload on one hardware (ties: the first measured)."""
    return best_records(select(records, workload_key), hw_fingerprint, measurer).get(workload_key)
