"""Measurers of mappings: the in-process tile-level walk (``WalkMeasurer``, ``sim.cost.walk``), or any
program that costs a Timeloop mapping file (a team's RTL, timeloop-model behind a wrapper, or
``accel-tune simulate --json --timeloop ARCH PROB ERT``).

The command gets the path of a Timeloop mapping YAML as its last argument and must print one
JSON object with ``cycles`` and ``energy_pj`` (positive numbers) on stdout and exit 0 (the
``simulate --timeloop --json`` object has both). A failure is one line (``MeasureError``).

How the mapper uses it (``tuner.search.map_learn.measure_guided``): the search ranks every mapping with
``sim``'s analytical model and keeps a pool of its best; some of those are measured in rounds,
ranked by the analytical model or by XGBoost when ``tuner.search.policy`` decides that training
pays, and the best measured one wins.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass

from sim.hw.hierarchy import Hierarchy
from sim.workload.nest import Nest

from .measure import MeasureError, _last_line, command_argv


@dataclass(frozen=True)
class WalkMeasurer:
    """The tile-level walk of a mapping (``sim.cost.walk.walk``) as the measurer: the same contract as
    a command (a Timeloop mapping file's text in, cycles and energy out), in process. The text is
    read back (``sim.timeloop.read_mapping``), so what is measured is what would be written."""
    hier: Hierarchy
    nest: Nest
    max_steps: int | None = None

    def measure(self, mapping_yaml: str) -> tuple[float, float]:
        import yaml
        from sim.timeloop.mapping import read_mapping
        from sim.cost.walk import DEFAULT_MAX_STEPS, walk
        m = read_mapping(yaml.safe_load(mapping_yaml)["mapping"], self.hier, self.nest)
        w = walk(self.hier, self.nest, m, max_steps=self.max_steps or DEFAULT_MAX_STEPS)
        return float(w.cycles), float(w.energy_pj)


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
