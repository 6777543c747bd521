"""Measurers: what the tuner trusts as the cost of one schedule.

A measurer has a ``name`` (stored in every tuning record, so cycles of different measurers are
never compared) and ``measure(workload, hw, schedule) -> cycles``; it raises ``MeasureError`` with
one line when it cannot measure. The tuner measures one schedule at a time and appends each result
to the log before asking for the next, so a failure loses nothing already measured.

- ``TileMeasurer`` (default): the tile-level simulator.
- ``AnalyticalMeasurer``: the closed-form simulator (fast; for tests and large sweeps).
- ``CommandMeasurer``: any external program, e.g. a team's RTL or cycle-accurate simulator. It gets
  one JSON object on stdin, ``{"workload": ..., "hardware": ..., "schedule": ...}`` (see
  ``request_json``), and must print ``{"cycles": <positive number>}`` on stdout and exit 0.
"""
from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from sim import HardwareConfig, Schedule, Workload, simulate, tile_cycles


class MeasureError(ValueError):
    """A schedule that could not be measured (the message is one line)."""


class Measurer(Protocol):
    name: str

    def measure(self, workload: Workload, hw: HardwareConfig, schedule: Schedule) -> float: ...


def workload_to_dict(wl: Workload) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": wl.kind, "dims": dict(wl.dims), "dim_order": [k for k, _ in wl.dims],
                         "dtype_bytes": wl.dtype_bytes, "epilogue": list(wl.epilogue), "op": wl.op,
                         "key": wl.key, "macs": wl.macs}
    if wl.is_mac:
        d["gemm_view"] = dict(zip(("g", "m", "n", "k"), wl.gemm_view()))
    if wl.kind == "conv2d":
        d["out_h"], d["out_w"] = wl.p, wl.q
    return d


def workload_from_dict(d: dict[str, Any]) -> Workload:
    """Inverse of ``workload_to_dict`` (JSON object keys may come back sorted: ``dim_order`` keeps
    the order the workload key is built in)."""
    dims = d["dims"]
    order = d.get("dim_order", list(dims))
    return Workload(d["kind"], tuple((k, dims[k]) for k in order), int(d.get("dtype_bytes", 4)),
                    tuple(d.get("epilogue", ())), d.get("op", ""))


def request_json(wl: Workload, hw: HardwareConfig, s: Schedule) -> str:
    """The JSON a ``CommandMeasurer`` writes to its command's stdin."""
    return json.dumps({"workload": workload_to_dict(wl), "hardware": hw.to_dict(), "schedule": s.to_dict()},
                      sort_keys=True)


@dataclass(frozen=True)
class TileMeasurer:
    name: str = "tile"

    def measure(self, workload, hw, schedule):
        return float(tile_cycles(workload, hw, schedule))  # = simulate(..., fidelity="tile").total_cycles


@dataclass(frozen=True)
class AnalyticalMeasurer:
    name: str = "analytical"

    def measure(self, workload, hw, schedule):
        return float(simulate(workload, hw, schedule, fidelity="analytical").total_cycles)


def command_argv(cmd: "str | Sequence[str]", timeout_s: float) -> tuple[str, ...]:
    """A measurer command as an argv tuple (a string is split like a shell), checked with its
    timeout; ``MeasureError`` when either is unusable."""
    if isinstance(cmd, str):
        cmd = shlex.split(cmd)
    argv = tuple(str(c) for c in cmd)
    if not argv:
        raise MeasureError("measurer command is empty")
    if not timeout_s > 0:
        raise MeasureError(f"measurer timeout must be > 0 seconds, got {timeout_s!r}")
    return argv


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


@dataclass(frozen=True)
class CommandMeasurer:
    """Runs ``command`` (an argv list, or a string split like a shell) once per schedule."""
    command: tuple[str, ...]
    timeout_s: float = 60.0
    label: str = ""

    def __post_init__(self):
        object.__setattr__(self, "command", command_argv(self.command, self.timeout_s))

    @property
    def name(self) -> str:
        return self.label or "command:" + shlex.join(self.command)

    def measure(self, workload, hw, schedule):
        shown = shlex.join(self.command)
        where = f"{workload.key} with {schedule.to_json()}"
        try:
            p = subprocess.run(self.command, input=request_json(workload, hw, schedule), capture_output=True,
                               text=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            raise MeasureError(f"measurer command '{shown}' timed out after {self.timeout_s:g} s on {where}") from None
        except OSError as e:
            raise MeasureError(f"measurer command '{shown}' cannot be run: {e.strerror or e}") from None
        if p.returncode != 0:
            why = _last_line(p.stderr) or _last_line(p.stdout) or "no output"
            raise MeasureError(f"measurer command '{shown}' failed with exit status {p.returncode} "
                               f"on {workload.key}: {why}")
        try:
            out = json.loads(p.stdout)
            cycles = out["cycles"]
            ok = not isinstance(cycles, bool) and isinstance(cycles, (int, float)) and cycles > 0
        except (json.JSONDecodeError, TypeError, KeyError):
            ok = False
        if not ok:
            raise MeasureError(f"measurer command '{shown}' printed {_last_line(p.stdout)[:80]!r}, "
                               f"expected a JSON object {{\"cycles\": <positive number>}}")
        return float(cycles)


def measurer_from_spec(spec: str | None, timeout_s: float = 60.0) -> Measurer:
    """``tile`` (default), ``analytical`` or ``cmd:<command line>`` (the CLI's ``--measurer``)."""
    if spec in (None, "", "tile"):
        return TileMeasurer()
    if spec == "analytical":
        return AnalyticalMeasurer()
    if spec.startswith("cmd:"):
        return CommandMeasurer(tuple(shlex.split(spec[4:])), timeout_s)
    raise MeasureError(f"measurer must be 'tile', 'analytical' or 'cmd:<command>', got {spec!r}")


def measure_all(measurer: Measurer, wl: Workload, hw: HardwareConfig, schedules: Sequence[Schedule]) -> list[float]:
    return [measurer.measure(wl, hw, s) for s in schedules]
