"""Contract suite every measurer passes, and the external command's failure modes: one clear line,
and no record measured before the failure is lost."""
import json
import sys
import textwrap

import pytest

import sim
from tuner.search.measure import (AnalyticalMeasurer, CommandMeasurer, MeasureError, TileMeasurer, measurer_from_spec,
                           request_json, workload_from_dict)
from tuner.records import load_records
from tuner.tune_kernels import tune_kernels

HW = sim.load_hw("edge-npu")
WL = sim.Workload.conv2d(1, 16, 14, 14, 32, 3, 3, pad=1, epilogue=("batch_norm", "relu"))

# An external measurer written the way a hardware team would: reads the request, answers cycles.
ANALYTICAL_CMD = textwrap.dedent("""
    import json, sys
    import sim
    from tuner.search.measure import workload_from_dict
    req = json.load(sys.stdin)
    hw = sim.HardwareConfig.from_dict(req["hardware"])
    s = sim.Schedule.from_dict(req["schedule"])
    print(json.dumps({"cycles": sim.simulate(workload_from_dict(req["workload"]), hw, s).total_cycles}))
""")


# A stand-in that starts fast (no simulator import): cycles from the tile sizes alone.
FAST_CMD = textwrap.dedent("""
    import json, sys
    req = json.load(sys.stdin)
    s = req["schedule"]
    print(json.dumps({"cycles": 1000 + s["tile_m"] + 2 * s["tile_n"] + 3 * s["tile_k"]}))
""")


def script(tmp_path, name, body):
    p = tmp_path / name
    p.write_text(body)
    return (sys.executable, str(p))


def measurers(tmp_path):
    return {"tile": TileMeasurer(), "analytical": AnalyticalMeasurer(),
            "command": CommandMeasurer(script(tmp_path, "m.py", ANALYTICAL_CMD), timeout_s=60)}


@pytest.mark.parametrize("kind", ["tile", "analytical", "command"])
def test_measurer_contract(tmp_path, kind):
    m = measurers(tmp_path)[kind]
    s = sim.default_schedule(WL, HW)
    c = m.measure(WL, HW, s)
    assert isinstance(c, float) and c > 0
    assert m.measure(WL, HW, s) == c                     # deterministic
    assert isinstance(m.name, str) and m.name
    fidelity = "tile" if kind == "tile" else "analytical"
    assert c == sim.simulate(WL, HW, s, fidelity=fidelity).total_cycles


def test_request_round_trips_the_workload():
    req = json.loads(request_json(WL, HW, sim.default_schedule(WL, HW)))
    assert workload_from_dict(req["workload"]) == WL
    assert sim.HardwareConfig.from_dict(req["hardware"]).fingerprint() == HW.fingerprint()
    assert req["workload"]["gemm_view"] == dict(zip("gmnk", WL.gemm_view()))


@pytest.mark.parametrize("body,timeout,match", [
    ("import sys; print('boom: license server down', file=sys.stderr); sys.exit(3)", 30,
     r"failed with exit status 3 on conv2d.*: boom: license server down"),
    ("import time; time.sleep(10)", 0.5, r"timed out after 0.5 s"),
    ("print('cycles: 12')", 30, r"printed 'cycles: 12', expected a JSON object"),
    ("print('{\"cycles\": -4}')", 30, r"expected a JSON object"),
])
def test_command_failures_are_one_clear_line(tmp_path, body, timeout, match):
    m = CommandMeasurer(script(tmp_path, "bad.py", body), timeout_s=timeout)
    with pytest.raises(MeasureError, match=match) as e:
        m.measure(WL, HW, sim.default_schedule(WL, HW))
    assert "\n" not in str(e.value)


def test_missing_command(tmp_path):
    m = CommandMeasurer((str(tmp_path / "no-such-simulator"),))
    with pytest.raises(MeasureError, match="cannot be run"):
        m.measure(WL, HW, sim.default_schedule(WL, HW))


def test_failing_command_loses_no_records(tmp_path):
    """The command works four times, then dies: the four results are in the log (with the cycles the
    command printed), the error names the failure, and a rerun with the fixed command does not
    repeat them."""
    counter = tmp_path / "count"
    body = FAST_CMD.replace("req = json.load", textwrap.dedent(f"""
        import pathlib
        c = pathlib.Path({str(counter)!r})
        n = int(c.read_text()) if c.exists() else 0
        c.write_text(str(n + 1))
        if n >= 4:
            sys.exit("simulator crashed")
        req = json.load"""))
    cmd = script(tmp_path, "flaky.py", body)
    log = tmp_path / "log.jsonl"
    with pytest.raises(MeasureError, match="exit status 1 .*simulator crashed"):
        tune_kernels([WL], HW, trials=16, log=log, measurer=CommandMeasurer(cmd, label="rtl"), progress=False)
    recs = load_records(log)
    assert len(recs) == 4 and all(r.measurer == "rtl" for r in recs)
    for r in recs:
        s = r.schedule
        assert r.cycles == 1000 + s.tile_m + 2 * s.tile_n + 3 * s.tile_k
    counter.write_text("-100")  # the simulator is fixed
    res = tune_kernels([WL], HW, trials=16, log=log, measurer=CommandMeasurer(cmd, label="rtl"), progress=False)
    assert res.reused == 4 and res.measurements == 12
    keys = [r.key for r in load_records(log)]
    assert len(keys) == 16 == len(set(keys))


def test_measurer_from_spec():
    assert isinstance(measurer_from_spec(None), TileMeasurer)
    assert isinstance(measurer_from_spec("analytical"), AnalyticalMeasurer)
    m = measurer_from_spec("cmd:python3 my_sim.py --fast")
    assert m.command == ("python3", "my_sim.py", "--fast")
    with pytest.raises(MeasureError, match="measurer must be 'tile', 'analytical' or 'cmd:<command>'"):
        measurer_from_spec("rtl")
    with pytest.raises(MeasureError, match="empty"):
        CommandMeasurer(())


def test_scalesim_adapter_without_scalesim_says_so():
    import importlib.util
    import pathlib
    if importlib.util.find_spec("scalesim") is not None:
        pytest.skip("SCALE-Sim is installed here")
    adapter = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "adapters" / "scalesim_measurer.py"
    m = CommandMeasurer((sys.executable, str(adapter)), timeout_s=60)
    with pytest.raises(MeasureError, match="exit status 2 .*SCALE-Sim is not installed"):
        m.measure(WL, HW, sim.default_schedule(WL, HW))


def test_tile_measurer_is_the_tile_level_simulators_total():
    import numpy as np
    from tuner.search.space import ScheduleSpace
    rng = np.random.default_rng(0)
    for wl in (WL, sim.Workload.gemm(100, 70, 300)):
        sp = ScheduleSpace.build(wl, HW)
        for s in sp.schedules(sp.sample(16, rng)):
            assert TileMeasurer().measure(wl, HW, s) == sim.simulate(wl, HW, s, fidelity="tile").total_cycles


def test_tile_measurer_adapter_is_the_built_in_measurer_in_another_process():
    """experiments/adapters/tile_measurer.py (the expensive-measurement regime of
    experiments/bench/model_regimes.py) returns the built-in measurer's cycles; bad input is one
    line on stderr and a non-zero exit, which CommandMeasurer reports."""
    import subprocess
    from pathlib import Path
    adapter = Path(__file__).resolve().parents[2] / "experiments" / "adapters" / "tile_measurer.py"
    m = CommandMeasurer((sys.executable, str(adapter)))
    for s in (sim.default_schedule(WL, HW), sim.scalesim_schedule(WL, HW, "os")):
        assert m.measure(WL, HW, s) == TileMeasurer().measure(WL, HW, s)
    p = subprocess.run([sys.executable, str(adapter)], input="{not json", capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("tile_measurer: bad request") and len(p.stderr.splitlines()) == 1
    too_big = sim.Schedule("ws", ("k", "n"), 10**6, 10**6, 10**6, "mnk", True, ("batch_norm", "relu"))
    with pytest.raises(MeasureError, match="failed with exit status 2"):
        m.measure(WL, HW, too_big)
