"""An external measurer for ``tuner.CommandMeasurer``: accel-tune's own tile-level simulator, run in
a separate process per schedule, the way a team's RTL or cycle-accurate simulator is plugged in.

    accel-tune tune ... --measurer "cmd:python experiments/adapters/tile_measurer.py"

It reads one request (``tuner.search.measure.request_json``) on stdin and prints ``{"cycles": N}``: the
same cycles as the built-in ``TileMeasurer``, at the price of a process start and imports per call
(about a tenth of a second; experiments/bench/model_regimes.py prints the measured figure). That
price is the point: it is the expensive-measurement regime of the learned-model benchmark, with a
cost the analytical prior does not describe exactly (the tile walk's pipelining).
"""
from __future__ import annotations

import json
import sys


def main() -> int:
    try:
        req = json.load(sys.stdin)
        wl_d, hw_d, s_d = req["workload"], req["hardware"], req["schedule"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        print(f"tile_measurer: bad request on stdin: {e}", file=sys.stderr)
        return 2
    import sim
    from tuner.search.measure import workload_from_dict
    try:
        wl = workload_from_dict(wl_d)
        hw = sim.HardwareConfig.from_dict(hw_d)
        rep = sim.simulate(wl, hw, sim.Schedule.from_dict(s_d), fidelity="tile")
    except (ValueError, KeyError, TypeError) as e:
        print(f"tile_measurer: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    print(json.dumps({"cycles": rep.total_cycles}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
