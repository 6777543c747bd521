"""An external measurer for ``tuner.CommandMeasurer``: measures one layer with SCALE-Sim.

    accel-tune tune ... --measurer "cmd:python experiments/adapters/scalesim_measurer.py"
    tuner.tune_kernels(tasks, hw, measurer=CommandMeasurer(("python", "experiments/adapters/scalesim_measurer.py")))

Protocol (what any adapter for a team's RTL or cycle-accurate simulator implements): one JSON object
on stdin, ``{"workload": ..., "hardware": ..., "schedule": ...}`` as ``tuner.search.measure.request_json``
writes it; print ``{"cycles": <positive number>}`` on stdout and exit 0; on failure print one line
on stderr and exit non-zero (the tuner reports that line and keeps every record measured so far).

SCALE-Sim maps a whole layer itself, so of the schedule only the dataflow is honoured (its tiles and
loop order are SCALE-Sim's own); the array, the SRAM sizes (KiB, one byte words) and the DRAM
bandwidth (words per cycle, SCALE-Sim's USER mode) come from the hardware. A padded convolution is
given as an input of ``(E - 1) * stride + R`` rows (SCALE-Sim has no padding field), a GEMM as a 1x1
convolution of an M x 1 input with K channels and N filters. Grouped convolutions are refused (SCALE-Sim
splits them into separate layers). The cycles reported are SCALE-Sim's total (compute + stall).
Needs ``pip install scalesim`` (SCALE-Sim 3 runs with numpy < 2).
"""
from __future__ import annotations

import csv
import json
import sys
import tempfile
from pathlib import Path


def fail(msg: str, status: int = 2) -> None:
    print(f"scalesim_measurer: {msg}", file=sys.stderr)
    sys.exit(status)


def topology_row(wl: dict) -> list:
    d = wl["dims"]
    if wl["kind"] == "conv2d":
        if d["groups"] != 1:
            fail(f"grouped convolution (groups={d['groups']}) is not supported by SCALE-Sim")
        if d["stride_h"] != d["stride_w"]:
            fail("SCALE-Sim takes one stride for both axes")
        if d["dil_h"] != 1 or d["dil_w"] != 1 or d["n"] != 1:
            fail("SCALE-Sim supports batch 1 without dilation only")
        s = d["stride_h"]
        h = (wl["out_h"] - 1) * s + d["r"]
        w = (wl["out_w"] - 1) * s + d["s"]
        return ["layer", h, w, d["r"], d["s"], d["c"], d["k"], s]
    if wl["kind"] == "gemm":
        if d["b"] != 1:
            fail("batched GEMM is not supported by this adapter")
        return ["layer", d["m"], 1, 1, 1, d["k"], d["n"], 1]
    fail(f"{wl['kind']} kernels have no SCALE-Sim model")


def config_text(hw: dict, dataflow: str) -> str:
    b = hw["buffers"]
    if b["unified_bytes"]:
        third = b["unified_bytes"] // 3
        sizes = (third, third, third)
    else:
        sizes = (b["ifmap_bytes"], b["weight_bytes"], b["output_bytes"])
    kib = [max(1, x // 1024) for x in sizes]
    bw = max(1, int(hw["dram"]["bytes_per_cycle"] // hw["array"]["word_bytes"]))
    return (f"[general]\nrun_name = accel_tune\n\n[architecture_presets]\n"
            f"ArrayHeight: {hw['array']['rows']}\nArrayWidth: {hw['array']['cols']}\n"
            f"IfmapSramSzkB: {kib[0]}\nFilterSramSzkB: {kib[1]}\nOfmapSramSzkB: {kib[2]}\n"
            f"IfmapOffset: 0\nFilterOffset: 10000000\nOfmapOffset: 20000000\n"
            f"Dataflow: {dataflow}\nBandwidth: {bw}\nMemoryBanks: 1\n\n"
            f"[run_presets]\nInterfaceBandwidth: USER\n")


def main() -> int:
    try:
        from scalesim.scale_sim import scalesim
    except ImportError:
        fail("SCALE-Sim is not installed (pip install scalesim; it needs numpy < 2)")
    try:
        req = json.load(sys.stdin)
        wl, hw, sched = req["workload"], req["hardware"], req["schedule"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        fail(f"bad request on stdin: {e}")
    row = topology_row(wl)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "arch.cfg").write_text(config_text(hw, sched["dataflow"]))
        with open(t / "topo.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["Layer name", "IFMAP Height", "IFMAP Width", "Filter Height", "Filter Width",
                        "Channels", "Num Filter", "Strides"])
            w.writerow(row)
        try:
            sim = scalesim(save_disk_space=True, verbose=False, config=str(t / "arch.cfg"),
                           topology=str(t / "topo.csv"))
            sim.run_scale(top_path=str(t / "out"))
        except Exception as e:  # SCALE-Sim's own failures, as one line
            fail(f"SCALE-Sim failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}", 1)
        reports = list((t / "out").rglob("COMPUTE_REPORT.csv"))
        if not reports:
            fail("SCALE-Sim wrote no COMPUTE_REPORT.csv", 1)
        with open(reports[0]) as f:
            rec = {k.strip(): v.strip() for k, v in next(csv.DictReader(f)).items() if k}
    cycles = float(rec["Total Cycles"])
    print(json.dumps({"cycles": cycles}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
