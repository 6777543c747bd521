"""Measured LLM numbers (``shared/oracle/llm``) costed the way a user would cost them.

Owns the contract of the measured rows (docs/SIMULATOR.md, "GPU presets"): an operator row is a
one-node fp16 ONNX file (inputs only, no initializers) built with ``onnx.helper`` and costed by
``accel-tune tune --onnx FILE --hw PRESET --offload all --json``, reading
``breakdown.device_s + breakdown.launch_s``; a serving row runs ``accel-tune llm ... --json`` and
reads ``ttft_ms`` (or ``throughput_tok_s``). Both go through ``tuner.cli.main`` in-process, so the
numbers are exactly what the command prints. Nothing here is fitted to the rows.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

OPS = ("matmul", "softmax", "layernorm", "gelu")


class MeasuredError(ValueError):
    """A measured row or file cannot be read (one line naming the row and the problem)."""


@dataclass(frozen=True)
class OpRow:
    """One measured operator: ``op`` (matmul [M,K]x[K,N]; softmax, layernorm, gelu over [M,N],
    normalised over the last axis), its shape, the preset it runs on and the measured seconds."""
    op: str
    shape: tuple[tuple[str, int], ...]
    hw: str
    measured_s: float
    dtype: str = "fp16"

    @property
    def dims(self) -> dict[str, int]:
        return dict(self.shape)

    @property
    def label(self) -> str:
        return f"{self.op} " + " ".join(f"{k}={v}" for k, v in self.shape)


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def op_row(d: Any, where: str) -> OpRow:
    """An ``OpRow`` from one JSON object of ``measured_ops.jsonl``."""
    if not isinstance(d, dict):
        raise MeasuredError(f"{where}: a row must be a JSON object")
    op, shape, hw, t = d.get("op"), d.get("shape"), d.get("hw"), d.get("measured_s")
    if op not in OPS:
        raise MeasuredError(f"{where}: op must be one of {', '.join(OPS)}, got {op!r}")
    need = ("M", "K", "N") if op == "matmul" else ("M", "N")
    if not isinstance(shape, dict) or not all(_positive_int(shape.get(k)) for k in need):
        raise MeasuredError(f"{where}: shape must give {', '.join(need)} as integers >= 1, got {shape!r}")
    if not isinstance(hw, str) or not hw:
        raise MeasuredError(f"{where}: hw must name a preset, got {hw!r}")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
        raise MeasuredError(f"{where}: measured_s must be a number > 0, got {t!r}")
    dtype = d.get("dtype", "fp16")
    if dtype != "fp16":
        raise MeasuredError(f"{where}: only fp16 operator rows are built, got dtype {dtype!r}")
    return OpRow(op, tuple((k, int(shape[k])) for k in need), hw, float(t), dtype)


def read_jsonl(path: str | Path) -> list[tuple[str, dict]]:
    """(where, object) for every non-blank line of a JSON-lines file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise MeasuredError(f"cannot read {p}: {e.strerror or e}") from None
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append((f"{p.name}:{i}", json.loads(line)))
            except json.JSONDecodeError as e:
                raise MeasuredError(f"{p.name}:{i}: not JSON ({e.msg})") from None
    return out


def one_op_model(row: OpRow):
    """The one-node fp16 ONNX model of ``row``: inputs only, no initializers."""
    from onnx import TensorProto, helper
    f16 = TensorProto.FLOAT16
    d = row.dims
    m, n = d["M"], d["N"]
    if row.op == "matmul":
        k = d["K"]
        node = helper.make_node("MatMul", ["A", "B"], ["Y"])
        ins = [helper.make_tensor_value_info("A", f16, [m, k]), helper.make_tensor_value_info("B", f16, [k, n])]
    elif row.op == "softmax":
        node = helper.make_node("Softmax", ["X"], ["Y"], axis=-1)
        ins = [helper.make_tensor_value_info("X", f16, [m, n])]
    elif row.op == "layernorm":
        node = helper.make_node("LayerNormalization", ["X", "S", "B"], ["Y"], axis=-1, epsilon=1e-5)
        ins = [helper.make_tensor_value_info("X", f16, [m, n]), helper.make_tensor_value_info("S", f16, [n]),
               helper.make_tensor_value_info("B", f16, [n])]
    else:  # gelu: the opset-20 Gelu op
        node = helper.make_node("Gelu", ["X"], ["Y"])
        ins = [helper.make_tensor_value_info("X", f16, [m, n])]
    opset = 20 if row.op == "gelu" else 17
    g = helper.make_graph([node], row.op, ins, [helper.make_tensor_value_info("Y", f16, [m, n])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``accel-tune ARGV`` in-process: (exit code, stdout, stderr)."""
    from .cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse: an unknown subcommand or option
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def op_seconds(row: OpRow, hw: str | None = None) -> float:
    """Our seconds for ``row``: ``breakdown.device_s + breakdown.launch_s`` of
    ``accel-tune tune --onnx ONE_OP.onnx --hw HW --offload all --json``."""
    import onnx
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / f"{row.op}.onnx"
        onnx.save(one_op_model(row), str(f))
        rc, out, err = run_cli(["tune", "--onnx", str(f), "--hw", hw or row.hw, "--offload", "all", "--json"])
    if rc != 0:
        raise MeasuredError(f"{row.label}: accel-tune tune failed: {err.strip().splitlines()[-1] if err.strip() else rc}")
    b = json.loads(out)["breakdown"]
    return float(b["device_s"]) + float(b["launch_s"])


def llm_available() -> bool:
    """Whether this accel-tune has the ``llm`` subcommand."""
    from .cli import build_parser
    sub = [a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction"]
    return bool(sub) and "llm" in sub[0].choices


def serving_value(d: dict) -> float:
    """Our value of one serving row (``metric`` ttft_ms or throughput_tok_s) from ``accel-tune llm``
    (with ``--decode-attention`` when the row names the engine's decode kernel)."""
    argv = ["llm", "--model", str(d["model"]), "--hw", str(d["hw"]), "--batch", str(d["batch"]),
            "--input-len", str(d["input_len"]), "--output-len", str(d["output_len"]), "--tp", str(d.get("tp", 1)),
            "--dtype", str(d.get("dtype", "fp16")), "--json"]
    if d.get("decode_attention"):
        argv[-1:-1] = ["--decode-attention", str(d["decode_attention"])]
    rc, out, err = run_cli(argv)
    if rc != 0:
        raise MeasuredError(f"accel-tune {' '.join(argv)} failed: {err.strip().splitlines()[-1] if err.strip() else rc}")
    return float(json.loads(out)[d["metric"]])


def rel_error(ours: float, measured: float) -> float:
    """Signed relative error (ours - measured) / measured."""
    return (ours - measured) / measured


def summary(errors: Iterable[float]) -> dict[str, float]:
    """Median and worst absolute relative error, and the worst ratio either way (2.0 = off by 2x)."""
    e = [x for x in errors if x is not None]
    if not e:
        return {"rows": 0}
    ratio = [max(1 + x, 1 / (1 + x)) if 1 + x > 0 else math.inf for x in e]
    return {"rows": len(e), "median_abs_error": statistics.median(abs(x) for x in e),
            "worst_abs_error": max(abs(x) for x in e), "worst_ratio": max(ratio)}


def fit_half(rows: list[OpRow]) -> tuple[list[OpRow], list[OpRow]]:
    """The rows the preset's fractions are fitted on (every other row of a file, from the
    first) and the rows held out (the rest)."""
    return rows[0::2], rows[1::2]


def roofline_terms(row: OpRow) -> tuple[float, float]:
    """(FLOPs, DRAM bytes) of ``row`` at fp16: a matmul reads A and B and writes C once; a
    vector op reads its input and writes its output once."""
    d = row.dims
    if row.op == "matmul":
        m, k, n = d["M"], d["K"], d["N"]
        return 2.0 * m * k * n, 2.0 * (m * k + k * n + m * n)
    return 0.0, 2.0 * 2 * d["M"] * d["N"]


VECTOR_CLASS = {"softmax": "softmax", "layernorm": "layer_norm", "gelu": "elementwise"}  # op -> workload kind


def fit_classes(rows: list[OpRow], peak_bytes_per_s: float, launch_s: float,
                ops: Iterable[str] = ("softmax", "layernorm", "gelu")) -> list[list]:
    """``kernels.classes`` entries ``[kind, dram_fraction, call_overhead_s]`` of the vector ops
    ``ops`` that ``rows`` measure: per op, ``measured - launch = overhead + bytes / (fraction x
    peak)`` fitted in closed form by least squares of the relative error (every size weighs the
    same, from the launch-bound rows to the bandwidth-bound ones), the overhead at least 0. An op
    with fewer than two rows is left out."""
    out = []
    for op in ops:
        pts = [(roofline_terms(r)[1] / peak_bytes_per_s, r.measured_s - launch_s, r.measured_s)
               for r in rows if r.op == op]
        if len(pts) < 2:
            continue
        x, y, m = (np.array(c) for c in zip(*pts))
        # least squares of (a + b x - y) / m: the relative error of each row
        a, b = np.linalg.lstsq(np.stack([1 / m, x / m], axis=1), y / m, rcond=None)[0]
        if a < 0:                      # no overhead: the slope alone, through the origin
            a, b = 0.0, float(np.linalg.lstsq((x / m)[:, None], y / m, rcond=None)[0][0])
        if b <= 0:
            continue
        out.append([VECTOR_CLASS[op], round(min(1.0, 1.0 / float(b)), 3), round(float(a), 7)])
    return out


def fit_fractions(rows: list[OpRow], peak_flops: float, peak_bytes_per_s: float,
                  launch_s: float) -> dict[str, float]:
    """The per-kernel-class figures a GPU preset states, in closed form from measured rows:

    - ``mac_overhead_s``: the median over matmuls whose roofline time is under 25 % of what was
      measured of (measured - launch - roofline time);
    - ``mac_fraction``: the median over the other, compute-bound matmuls (FLOP time at peak above
      byte time at peak) of FLOP time / (measured - launch - overhead);
    - ``dram_fraction``: the same over the byte-bound matmuls, with the byte time;
    - ``softmax_dram_fraction``: the same over softmax rows whose byte time is at least the launch.
    Rows too small for a class are not used for it; a class without rows is left out."""
    out: dict[str, float] = {}
    mm = [r for r in rows if r.op == "matmul"]
    tiny = []
    for r in mm:
        f, b = roofline_terms(r)
        roof = max(f / peak_flops, b / peak_bytes_per_s)
        if roof < 0.25 * r.measured_s:
            tiny.append(r.measured_s - launch_s - roof)
    over = statistics.median(tiny) if tiny else 0.0
    if tiny:
        out["mac_overhead_s"] = max(0.0, over)
    comp, mem = [], []
    for r in mm:
        f, b = roofline_terms(r)
        tf, tb = f / peak_flops, b / peak_bytes_per_s
        left = r.measured_s - launch_s - over
        if max(tf, tb) < 0.25 * r.measured_s or left <= 0:
            continue
        (comp if tf >= tb else mem).append((tf if tf >= tb else tb) / left)
    if comp:
        out["mac_fraction"] = min(1.0, statistics.median(comp))
    if mem:
        out["dram_fraction"] = min(1.0, statistics.median(mem))
    sm = []
    for r in rows:
        if r.op == "softmax":
            tb = roofline_terms(r)[1] / peak_bytes_per_s
            if tb >= launch_s:
                sm.append(tb / (r.measured_s - launch_s))
    if sm:
        out["softmax_dram_fraction"] = min(1.0, statistics.median(sm))
    return out
