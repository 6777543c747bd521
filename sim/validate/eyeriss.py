"""The fabricated Eyeriss chip (``shared/oracle/eyeriss``): its measured per-layer latencies
against ours (issue 19, part 2). ``experiments/validate_eyeriss.py`` prints what ``compare`` and
``vgg16`` compute.

Per layer: the chip's total latency (with off-chip transfers) beside ours at the preset's clock,
under the chip's own row-stationary mapping (``sim.mapping.row_stationary``, its Table III
parameters rounded to divisors) and under the tool's mapping (the default mapping policy, which
has the row-stationary candidates in its space), every figure walked tile by tile
(``fidelity="tile"``, the cost `accel-tune tune` and `run` use).

RLC: the chip compresses ifmaps and ofmaps on its link by run-length coding and the presets do
not; ``rlc_hardware`` shows what that would change. Eyeriss's RLC packs three (5-bit run, 16-bit
value) pairs in a 64-bit word (JSSC 2017, its RLC description), so a stream with a fraction Z of zeros (runs of
up to 31 zeros folded into the next pair) takes (1 - Z) x 21/16 x 64/63 of its raw bits (never
more than raw); weights go raw. Our per-tensor DRAM words of the layer give the link's effective
speed-up, applied to the outermost level's bandwidths.

VGG-16: its 13 convolutions at batch 3, the mapping left to the tool, beside the chip's measured
total latency per layer (JSSC 2017 Table VI, as transcribed in cucapra/fodlam
data/eyeriss-vgg16.csv).

GLB bound (``glb_bound_ms``): the chip's own global-buffer accesses (Tables V, VI) moved at the
preset's buffer port rates, beside its processing latency: a check of those rates (the NoC
widths) against the silicon that needs no mapping of ours.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..cost.kernel import simulate
from ..cost.walk import walk
from ..hw.config import HardwareConfig
from ..hw.config_hierarchy import hierarchy_of
from ..mapping.row_stationary import RowStationary, row_stationary
from ..workload.nest import nest_from_workload
from ..workload.workload import Workload

# VGG-16's 13 convolutions (3x3, stride 1, pad 1) as (layer, C, M, H = W, the chip's measured total
# latency in ms at batch 3, its processing latency in ms, its global-buffer accesses in MB): JSSC 2017
# Table VI (cucapra/fodlam data/eyeriss-vgg16.csv). CONV2-2's processing latency (1110.3) exceeds its
# total, a transcription slip; it is kept as printed.
VGG16 = (("CONV1-1", 3, 64, 224, 76.2, 38.0, 112.5), ("CONV1-2", 64, 64, 224, 910.3, 810.6, 2402.8),
         ("CONV2-1", 64, 128, 112, 470.3, 405.3, 1201.4), ("CONV2-2", 128, 128, 112, 894.3, 1110.3, 2402.3),
         ("CONV3-1", 128, 256, 56, 241.1, 204.0, 607.4), ("CONV3-2", 256, 256, 56, 460.9, 408.1, 1214.8),
         ("CONV3-3", 256, 256, 56, 457.7, 408.1, 1214.8), ("CONV4-1", 256, 512, 28, 135.3, 105.1, 321.3),
         ("CONV4-2", 512, 512, 28, 254.8, 210.0, 643.7), ("CONV4-3", 512, 512, 28, 246.3, 210.0, 643.7),
         ("CONV5-1", 512, 512, 14, 54.3, 48.3, 90.0), ("CONV5-2", 512, 512, 14, 53.7, 48.5, 90.0),
         ("CONV5-3", 512, 512, 14, 53.7, 48.5, 90.0))
VGG16_BATCH = 3
RLC_BITS = 21 / 16 * 64 / 63     # one (5-bit run, 16-bit value) pair per value, 3 pairs per 64-bit word


@dataclass(frozen=True)
class LayerResult:
    layer: str
    measured_ms: float
    chip_mapping_ms: float | None     # ours under the chip's row-stationary parameters (None: none given)
    tool_ms: float                    # ours under the tool's mapping
    tool_rlc_ms: float                # the same with the link carrying RLC-compressed ifmaps/ofmaps
    tool_dram_mb: float               # DRAM traffic of the tool's mapping (uncompressed)
    measured_dram_mb: float | None
    measured_processing_ms: float | None = None   # the chip's latency without the link (Tables V, VI)
    glb_bound_ms: float | None = None             # the chip's GLB accesses at the preset's GLB port rates

    @property
    def error(self) -> float:
        """Ours (the tool's mapping) / measured - 1."""
        return self.tool_ms / self.measured_ms - 1


def conv_workload(conv: dict, batch: int) -> Workload:
    """A row's convolution (``conv``: H, W, C, M, R, S, stride, pad, groups) at ``batch``."""
    return Workload.conv2d(n=batch, c=conv["C"], h=conv["H"], w=conv["W"], k=conv["M"], r=conv["R"],
                           s=conv["S"], stride=conv["stride"], pad=conv["pad"], groups=conv.get("groups", 1))


def read_rows(oracle_dir: Path) -> list[dict]:
    with open(Path(oracle_dir) / "alexnet.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def rlc_hardware(hw: HardwareConfig, wl: Workload, zeros: float) -> HardwareConfig:
    """``hw`` with its DRAM level's bandwidths raised by what RLC at a fraction ``zeros`` of
    zeros saves on this layer's ifmap and ofmap words (weights go raw), from our own counts."""
    ratio = min(1.0, (1.0 - zeros) * RLC_BITS)
    rep = simulate(wl, hw, fidelity="analytical")
    dram = rep.bytes_by_operand["dram"]
    raw = dram["ifmap"] + dram["weight"] + dram["output"]
    packed = dram["weight"] + ratio * (dram["ifmap"] + dram["output"])
    speed = raw / packed if packed else 1.0
    top = hw.levels[0]
    return hw.with_overrides({f"levels.{top.name}.read_bandwidth": top.read_bandwidth * speed,
                              f"levels.{top.name}.write_bandwidth": top.write_bandwidth * speed})


def cost_layer(wl: Workload, hw: HardwareConfig, rs: RowStationary | None = None,
               rlc_zeros: float = 0.4) -> tuple[float | None, float, float, float]:
    """(ms under the chip's RS mapping or None, ms under the tool's mapping, the same with RLC,
    DRAM MB of the tool's mapping) of one layer, every figure walked tile by tile."""
    ms = 1e3 / hw.clock_hz
    chip = None
    if rs is not None:
        hier, nest = hierarchy_of(hw), nest_from_workload(wl)
        m = row_stationary(hier, nest, rs)
        if m is not None:
            m.check(hier, nest)
            chip = walk(hier, nest, m).cycles * ms
    rep = simulate(wl, hw, fidelity="tile")
    rlc = simulate(wl, rlc_hardware(hw, wl, rlc_zeros), fidelity="tile")
    return chip, rep.total_cycles * ms, rlc.total_cycles * ms, (rep.dram_read_bytes + rep.dram_write_bytes) / 1e6


def glb_bound_ms(glb_mb: float, hw: HardwareConfig) -> float | None:
    """The least time the chip's measured global-buffer accesses (``glb_mb``, reads and writes)
    take through the preset's buffer ports (the level that fans out to the PEs: its read plus
    write words per cycle, both saturated), in ms; None without such a level or a bounded port.
    Eyeriss's buffer talks to the array only through its NoC (GIN reads, GON writes), so a layer
    whose processing time sits near this bound ran bound by those networks."""
    hier = hierarchy_of(hw)
    fan = [lv for i, lv in enumerate(hier.levels) if hier.fanout(i) != (1, 1)]
    if len(fan) != 1 or fan[0].read_bandwidth is None or fan[0].write_bandwidth is None:
        return None
    words = glb_mb * 1e6 / (fan[0].word_bits / 8)
    return words / (fan[0].read_bandwidth + fan[0].write_bandwidth) / hw.clock_hz * 1e3


def compare(rows: list[dict], hw: HardwareConfig, rlc_zeros: float = 0.4) -> list[LayerResult]:
    """Ours vs the chip on the oracle ``rows`` (one AlexNet layer each)."""
    out = []
    for r in rows:
        wl = conv_workload(r["conv"], r["batch"])
        rs = RowStationary(**r["row_stationary_mapping"]) if "row_stationary_mapping" in r else None
        chip, tool, rlc, dram = cost_layer(wl, hw, rs, rlc_zeros)
        glb = glb_bound_ms(r["glb_mb"], hw) if "glb_mb" in r else None
        out.append(LayerResult(r["layer"], r["total_latency_ms"], chip, tool, rlc, dram, r.get("dram_mb"),
                               r.get("processing_latency_ms"), glb))
    return out


def vgg16(hw: HardwareConfig, rlc_zeros: float = 0.4) -> list[LayerResult]:
    """The 13 VGG-16 convolutions at batch 3, the mapping left to the tool."""
    out = []
    for name, c, m, h, measured, processing, glb_mb in VGG16:
        wl = conv_workload(dict(H=h, W=h, C=c, M=m, R=3, S=3, stride=1, pad=1), VGG16_BATCH)
        _, tool, rlc, dram = cost_layer(wl, hw, None, rlc_zeros)
        out.append(LayerResult(name, measured, None, tool, rlc, dram, None, processing, glb_bound_ms(glb_mb, hw)))
    return out


def summary(results: list[LayerResult]) -> dict[str, float]:
    """Median and worst |error| of the tool's mapping, and of the same with RLC."""
    errs = [abs(r.error) for r in results]
    rlc = [abs(r.tool_rlc_ms / r.measured_ms - 1) for r in results]
    return {"median_abs_error": statistics.median(errs), "worst_abs_error": max(errs),
            "median_abs_error_rlc": statistics.median(rlc), "worst_abs_error_rlc": max(rlc),
            "total_measured_ms": sum(r.measured_ms for r in results), "total_ours_ms": sum(r.tool_ms for r in results)}




__all__ = ["LayerResult", "VGG16", "compare", "conv_workload", "cost_layer", "glb_bound_ms", "read_rows", "rlc_hardware",
           "summary", "vgg16"]
