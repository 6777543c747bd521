"""An external measurer of mappings: any program that costs a Timeloop mapping file (a team's
RTL, timeloop-model behind a wrapper, or ``accel-tune simulate --json --timeloop ARCH PROB ERT``).

The command gets the path of a Timeloop mapping YAML as its last argument and must print one
JSON object with ``cycles`` and ``energy_pj`` (positive numbers) on stdout and exit 0 (the
``simulate --timeloop --json`` object has both). A failure is one line (``MeasureError``).

How the mapper uses it (``measure_best``): the search ranks every mapping with ``sim``'s
analytical model (microseconds each) and keeps its best ``k``; only those are measured, and the
best measured one wins. A learned correction (XGBoost over mapping features, as the schedule
tuner's) is not used here: see docs/TUNING.md, "Multi-level mappings".
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Sequence

from .measure import MeasureError, _last_line, command_argv


@dataclass(frozen=True)
class MapCommandMeasurer:
    command: tuple[str, ...]
    timeout_s: float = 600.0

    def __post_init__(self):
        object.__setattr__(self, "command", command_argv(self.command, self.timeout_s))

    def measure(self, mapping_yaml: str) -> tuple[float, float]:
        """(cycles, energy_pj) the command reports for one mapping."""
        shown = shlex.join(self.command)
        fd, path = tempfile.mkstemp(suffix=".map.yaml", prefix="accel-tune-")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(mapping_yaml)
            try:
                p = subprocess.run([*self.command, path], capture_output=True, text=True, timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                raise MeasureError(f"measurer command '{shown}' timed out after {self.timeout_s:g} s") from None
            except OSError as e:
                raise MeasureError(f"measurer command '{shown}' cannot be run: {e.strerror or e}") from None
        finally:
            os.unlink(path)
        if p.returncode != 0:
            why = _last_line(p.stderr) or _last_line(p.stdout) or "no output"
            raise MeasureError(f"measurer command '{shown}' failed with exit status {p.returncode}: {why}")
        try:
            out = json.loads(p.stdout)
            vals = (out["cycles"], out["energy_pj"])
            ok = all(not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0 for v in vals)
        except (json.JSONDecodeError, TypeError, KeyError):
            ok = False
        if not ok:
            raise MeasureError(f"measurer command '{shown}' printed {_last_line(p.stdout)[:80]!r}, expected a JSON "
                               f"object with positive \"cycles\" and \"energy_pj\"")
        return float(vals[0]), float(vals[1])


@dataclass(frozen=True)
class Measured:
    index: int                  # into the candidates
    cycles: float
    energy_pj: float
    seconds: float              # measuring all candidates
    count: int


def measure_best(measurer: MapCommandMeasurer, yamls: Sequence[str], metric: str) -> Measured:
    """Measure every candidate (best predicted first) and return the best measured for ``metric``."""
    from .mapsearch import Costs, metric_keys
    import numpy as np
    t0 = time.perf_counter()
    got = [measurer.measure(y) for y in yamls]
    c = Costs(np.array([g[0] for g in got]), np.array([g[1] for g in got]))
    p, s = metric_keys(metric, c)
    i = int(np.lexsort((s, p))[0])
    return Measured(i, float(c.cycles[i]), float(c.energy_pj[i]), time.perf_counter() - t0, len(got))
