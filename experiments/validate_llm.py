"""accel-tune against measured GPUs (shared/oracle/llm), and GenZ at its defaults on the same points.

    python experiments/validate_llm.py ../shared/oracle/llm [--genz /work/venvs/genz/bin/python]
        [--beyond experiments/data/trtllm_performance.jsonl | --beyond '']
        [--beyond-ops experiments/data/llmcompass_ops.jsonl | --beyond-ops ''] [--json]

Operator rows (measured_ops.jsonl): a one-node fp16 ONNX file per row, costed by
``accel-tune tune --onnx FILE --hw PRESET --offload all --json`` (in-process, the numbers the CLI
prints), ``breakdown.device_s + breakdown.launch_s`` against ``measured_s``. Each row is marked
``fit`` or ``held``: the GPU preset's kernel fractions were fitted (``tuner.measured.fit_fractions``)
on the ``fit`` half only; the script refits them from that half and prints them beside the preset's,
and reports the error on the held-out half apart.

Serving rows (measured_serving.jsonl): ``accel-tune llm --model M --hw H --batch B --input-len I
--output-len O --tp T --dtype D --json``, reading the row's metric; when this accel-tune has no
``llm`` command, each such row says so.

Beyond the shared folder (``--beyond``, default ``experiments/data/trtllm_performance.jsonl``):
every other measured point of the same TensorRT-LLM document, typed from it with its table and
version: first-token latencies on H100 and L40S in fp8 (v0.5) and the peak-throughput tables
(A100 fp16 and H100 fp8 v0.6.1, L40S fp8 v0.5). Nothing was fitted on them. The H100 table states
output tokens per second per GPU; the A100 table's header says output tokens per second, but
with TP > 1 its figures are per GPU too (its TP-2 GPT-J rows are within 2 % of ours per GPU and
off by exactly 2x as totals), so those rows read ``throughput_tok_s_per_device``.

Operators beyond the shared folder (``--beyond-ops``, default ``experiments/data/llmcompass_ops.jsonl``):
the rest of LLMCompass's measured set at commit b95c6c9 (``ae/figure5/*/real_hardware``), the
same torch fp16 timing of one call with its launch: LayerNorm over [M, N] and GELU (tanh) over
[N] elements on the A100, and matmul, softmax, LayerNorm and GELU on an MI210. The CSVs store
matmul in milliseconds and the others as elements per second (M x N / latency / 1e9); the rows
are in seconds. The A100 preset's ``kernels.classes`` (LayerNorm, GELU) and every MI210 figure
were fitted on every other row (``fit_half``); the rest is held out and reported apart.

The decode attention kernel is the engine's (``--decode-attention``): TensorRT-LLM v0.5-v0.7 ran
its grouped-query decode kernel (XQA) only for what it was built for, a head size of 128 with 8
query heads per KV head (``cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/cubin/
xqa_kernel_cubin.h`` of that time: ``d_128 ... nqpkv_8``), which llama-2-70b is and where the
document says XQA was enabled; every other model decoded with its masked multi-head attention, one
thread block per query head: ``per-head``. Falcon-180B (head size 64, 29 query heads per KV head)
is the one GQA model that took it.

GenZ (pip ``genz-llm``, in its own environment: ``--genz`` names its interpreter) runs through
``experiments/adapters/genz_points.py`` on its ``A100_80GB_GPU`` system; without it the column is
skipped with a note.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from sim.hw.config import load_hw
from tuner.measured import (MeasuredError, fit_classes, fit_fractions, fit_half, llm_available, op_row, op_seconds,
                            read_jsonl, rel_error, serving_value, summary)

HERE = Path(__file__).resolve().parent
DEFAULT_GENZ = "/work/venvs/genz/bin/python"


def genz_column(python: str | None, points: list[dict]) -> tuple[list[dict] | None, str]:
    """GenZ's answers for ``points`` (see adapters/genz_points.py), or None and why not."""
    if not python or not Path(python).exists():
        return None, f"GenZ skipped: no GenZ interpreter at {python} (pip install genz-llm in its own venv)"
    try:
        r = subprocess.run([python, str(HERE / "adapters" / "genz_points.py")], input=json.dumps(points),
                           capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"GenZ skipped: {e}"
    if r.returncode != 0:
        return None, f"GenZ skipped: {(r.stderr.strip().splitlines() or ['failed'])[-1]}"
    return json.loads(r.stdout), "GenZ: genz-llm at its defaults (system A100_80GB_GPU, bf16)"


XQA_SHAPES = {(128, 8)}   # (head size, query heads per KV head) of TensorRT-LLM's first XQA kernels


def engine_decode_kernel(model: str) -> str:
    """The decode attention kernel TensorRT-LLM v0.5-v0.7 ran for ``model`` (module docstring)."""
    from partition.llm.config import resolve
    cfg = resolve(model)
    return "grouped" if (cfg.head_dim, cfg.heads // cfg.kv_heads) in XQA_SHAPES else "per-head"


def serving_rows(rows: list[dict], has_llm: bool, genz: list[dict] | None = None) -> list[dict]:
    """Ours (and GenZ's, when given) against each measured serving row."""
    out = []
    for j, d in enumerate(rows):
        d = {**d, "decode_attention": d.get("decode_attention") or engine_decode_kernel(d["model"])}
        label = f"{d['model']} B={d['batch']} I={d['input_len']} O={d['output_len']} tp={d.get('tp', 1)} {d['metric']}"
        ours, note = None, ""
        if has_llm:
            try:
                ours = serving_value(d)
            except MeasuredError as e:
                note = str(e)
        else:
            note = "llm command not available"
        g = genz[j] if genz else {"skip": "GenZ not run"}
        out.append({"row": label, "hw": d["hw"], "dtype": d.get("dtype", "fp16"), "metric": d["metric"],
                    "decode_attention": d["decode_attention"],
                    "measured": d["value"], "ours": ours,
                    "ours_error": rel_error(ours, d["value"]) if ours is not None else None, "ours_note": note,
                    "genz": g.get("value"), "genz_error": rel_error(g["value"], d["value"]) if "value" in g else None,
                    "genz_note": g.get("skip", "")})
    return out


def op_rows(ops: list) -> list[dict]:
    """Ours against each measured operator row, marked ``fit`` (the half a preset's figures were
    fitted on, ``fit_half``) or ``held``."""
    held_ids = {id(r) for r in fit_half(ops)[1]}
    out = []
    for r in ops:
        ours = op_seconds(r)
        out.append({"row": r.label, "hw": r.hw, "op": r.op, "split": "held" if id(r) in held_ids else "fit",
                    "measured": r.measured_s, "ours": ours, "ours_error": rel_error(ours, r.measured_s)})
    return out


def beyond_op_rows(path: Path) -> tuple[list[dict], dict]:
    """``op_rows`` of the measured operator rows of ``path`` (LLMCompass's other operators and
    GPU: the presets' ``classes`` and the MI210's fractions were fitted on the ``fit`` rows only),
    and the preset's figures beside a refit on the fit half, per preset."""
    ops = [op_row(d, w) for w, d in read_jsonl(path)]
    return op_rows(ops), refits(ops, ("mac_overhead_s", "mac_fraction", "dram_fraction"), classes=True)


def refits(ops: list, preset_keys: tuple[str, ...], classes: bool = False) -> dict:
    """Per preset of ``ops``: its ``kernels`` figures ``preset_keys`` beside the same figures
    fitted on the fit half of ``ops`` (``fit_half``); with ``classes``, its ``kernels.classes`` too."""
    fit = fit_half(ops)[0]
    out = {}
    for h in sorted({r.hw for r in ops}):
        hw = load_hw(h)
        mine = [r for r in fit if r.hw == h]
        bw = hw.dram.bytes_per_cycle * hw.clock_hz
        refit = fit_fractions(mine, hw.pes * 2 * hw.clock_hz, bw, hw.link.launch_latency_s)
        preset = {k: getattr(hw.kernels, k) for k in preset_keys}
        if classes:
            refit["classes"] = fit_classes(mine, bw, hw.link.launch_latency_s)
            preset["classes"] = [list(c) for c in hw.kernels.classes]
        out[h] = {"refit_on_fit_half": refit, "preset": preset}
    return out


def run(folder: Path, genz: str | None, beyond: Path | None = None, beyond_ops: Path | None = None) -> dict:
    ops = [op_row(d, w) for w, d in read_jsonl(folder / "measured_ops.jsonl")]
    serving = [d for _, d in read_jsonl(folder / "measured_serving.jsonl")] \
        if (folder / "measured_serving.jsonl").exists() else []
    points = [{"kind": r.op, **r.dims} for r in ops]
    points += [{"kind": "serving", **{k: d.get(k) for k in ("model", "batch", "input_len", "tp", "metric")}}
               for d in serving]
    gz, gz_note = genz_column(genz, points)
    rows = op_rows(ops)
    for i, (row, r) in enumerate(zip(rows, ops)):
        g = gz[i] if gz else {"skip": "GenZ not run"}
        row.update({"genz": g.get("value"), "genz_note": g.get("skip", ""),
                    "genz_error": rel_error(g["value"], r.measured_s) if "value" in g else None})
    has_llm = llm_available()
    srows = serving_rows(serving, has_llm, gz[len(ops):] if gz else None)
    brows = serving_rows([d for _, d in read_jsonl(beyond)], has_llm) if beyond else []
    groups = sorted({(r["hw"], r["dtype"], r["metric"].split("_per_")[0]) for r in brows})
    refit = refits(ops, ("mac_overhead_s", "mac_fraction", "dram_fraction", "softmax_dram_fraction"))
    return {
        "operators": rows, "serving": srows, "genz": gz_note, "fractions": refit,
        "summary": {"ours_all": summary(r["ours_error"] for r in rows),
                    "ours_fit": summary(r["ours_error"] for r in rows if r["split"] == "fit"),
                    "ours_held_out": summary(r["ours_error"] for r in rows if r["split"] == "held"),
                    "genz_same_rows": summary(r["genz_error"] for r in rows),
                    "ours_on_genz_rows": summary(r["ours_error"] for r in rows if r["genz_error"] is not None),
                    "serving_ours": summary(r["ours_error"] for r in srows),
                    "serving_genz": summary(r["genz_error"] for r in srows),
                    "beyond_ours": summary(r["ours_error"] for r in brows),
                    "beyond_groups": {f"{h} {dt} {m}": summary(r["ours_error"] for r in brows
                                                             if (r["hw"], r["dtype"], r["metric"].split("_per_")[0])
                                                             == (h, dt, m))
                                      for h, dt, m in groups}},
        "beyond": brows, "beyond_source": str(beyond) if beyond else None,
        **_beyond_ops(beyond_ops)}


def _beyond_ops(path: Path | None) -> dict:
    if not path:
        return {"beyond_ops": [], "beyond_ops_source": None}
    rows, refit = beyond_op_rows(path)
    groups = sorted({(r["hw"], r["op"]) for r in rows})
    return {"beyond_ops": rows, "beyond_ops_source": str(path), "beyond_ops_fractions": refit,
            "beyond_ops_summary": {
                "all": summary(r["ours_error"] for r in rows),
                "held_out": summary(r["ours_error"] for r in rows if r["split"] == "held"),
                "groups": {f"{h} {op}": summary(r["ours_error"] for r in rows if (r["hw"], r["op"]) == (h, op))
                           for h, op in groups},
                "held_out_groups": {f"{h} {op}": summary(r["ours_error"] for r in rows
                                                         if (r["hw"], r["op"]) == (h, op) and r["split"] == "held")
                                    for h, op in groups}}}


def _us(x: float | None) -> str:
    return f"{x * 1e6:10.1f}" if x is not None else f"{'-':>10s}"


def _pct(x: float | None) -> str:
    return f"{x * 100:+7.1f}%" if x is not None else f"{'-':>8s}"


def _fmt_summary(s: dict) -> str:
    if not s.get("rows"):
        return "no rows"
    return (f"{s['rows']} rows, median |error| {s['median_abs_error'] * 100:.1f} %, worst "
            f"{s['worst_abs_error'] * 100:.1f} % (x{s['worst_ratio']:.2f})")


def print_table(out: dict) -> None:
    print(f"{'operator row':34s} {'split':5s} {'measured us':>11s} {'ours us':>10s} {'ours err':>8s} "
          f"{'GenZ us':>10s} {'GenZ err':>8s}")
    for r in out["operators"]:
        print(f"{r['row'][:34]:34s} {r['split']:5s} {_us(r['measured']):>11s} {_us(r['ours'])} {_pct(r['ours_error'])} "
              f"{_us(r['genz'])} {_pct(r['genz_error'])}")
    print()
    print(f"{'serving row':40s} {'measured':>9s} {'ours':>9s} {'ours err':>8s} {'GenZ':>9s} {'GenZ err':>8s}")
    for r in out["serving"]:
        ours = f"{r['ours']:9.1f}" if r["ours"] is not None else f"{'-':>9s}"
        genz = f"{r['genz']:9.1f}" if r["genz"] is not None else f"{'-':>9s}"
        note = "; ".join(n for n in (r["ours_note"], r["genz_note"]) if n)
        print(f"{r['row'][:40]:40s} {r['measured']:9.1f} {ours} {_pct(r['ours_error'])} {genz} {_pct(r['genz_error'])}"
              + (f"  ({note})" if note else ""))
    print()
    s = out["summary"]
    print(f"ours, operators, all:         {_fmt_summary(s['ours_all'])}")
    print(f"ours, operators, fit half:    {_fmt_summary(s['ours_fit'])}")
    print(f"ours, operators, held out:    {_fmt_summary(s['ours_held_out'])}")
    print(f"GenZ, operators it models:    {_fmt_summary(s['genz_same_rows'])}")
    print(f"ours, the same rows:          {_fmt_summary(s['ours_on_genz_rows'])}")
    print(f"ours, serving:                {_fmt_summary(s['serving_ours'])}")
    print(f"GenZ, serving:                {_fmt_summary(s['serving_genz'])}")
    print(out["genz"])
    if out["beyond"]:
        print()
        print(f"beyond the shared folder ({out['beyond_source']}): measured, nothing fitted on them")
        print(f"{'serving row':58s} {'hw':14s} {'dtype':5s} {'decode':8s} {'measured':>9s} {'ours':>9s} "
              f"{'ours err':>8s}")
        for r in out["beyond"]:
            ours = f"{r['ours']:9.1f}" if r["ours"] is not None else f"{'-':>9s}"
            dec = r["decode_attention"] if r["metric"] != "ttft_ms" else "-"
            print(f"{r['row'][:58]:58s} {r['hw']:14s} {r['dtype']:5s} {dec:8s} {r['measured']:9.1f} {ours} "
                  f"{_pct(r['ours_error'])}" + (f"  ({r['ours_note']})" if r["ours_note"] else ""))
        for g, sm in s["beyond_groups"].items():
            print(f"ours, {g + ':':42s} {_fmt_summary(sm)}")
        print(f"ours, beyond, all:{'':31s} {_fmt_summary(s['beyond_ours'])}")
    for h, f in out["fractions"].items():
        print(f"{h}: preset {json.dumps(f['preset'])}; refit on the fit half "
              f"{json.dumps({k: round(v, 9) for k, v in f['refit_on_fit_half'].items()})}")
    if out.get("beyond_ops"):
        print()
        print(f"operators beyond the shared folder ({out['beyond_ops_source']}): the presets' classes (and the "
              f"MI210's fractions) fitted on the fit rows only")
        print(f"{'operator row':38s} {'hw':14s} {'split':5s} {'measured us':>11s} {'ours us':>10s} {'ours err':>8s}")
        for r in out["beyond_ops"]:
            print(f"{r['row'][:38]:38s} {r['hw']:14s} {r['split']:5s} {_us(r['measured']):>11s} {_us(r['ours'])} "
                  f"{_pct(r['ours_error'])}")
        bs = out["beyond_ops_summary"]
        for g, sm in bs["groups"].items():
            print(f"ours, {g + ':':30s} all {_fmt_summary(sm)}; held out {_fmt_summary(bs['held_out_groups'][g])}")
        print(f"ours, operators beyond, all:   {_fmt_summary(bs['all'])}")
        print(f"ours, operators beyond, held out: {_fmt_summary(bs['held_out'])}")
        for h, f in out["beyond_ops_fractions"].items():
            print(f"{h}: preset {json.dumps(f['preset'])}; refit on the fit half {json.dumps(f['refit_on_fit_half'])}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the measured folder (shared/oracle/llm): measured_ops.jsonl, measured_serving.jsonl")
    p.add_argument("--genz", default=DEFAULT_GENZ, help="python interpreter with genz-llm installed ('' = skip)")
    p.add_argument("--beyond", default=str(HERE / "data" / "trtllm_performance.jsonl"),
                   help="measured serving rows beyond the shared folder ('' = skip)")
    p.add_argument("--beyond-ops", default=str(HERE / "data" / "llmcompass_ops.jsonl"),
                   help="measured operator rows beyond the shared folder ('' = skip)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    try:
        out = run(Path(a.folder), a.genz or None, Path(a.beyond) if a.beyond else None,
                  Path(a.beyond_ops) if a.beyond_ops else None)
    except (MeasuredError, ValueError, OSError) as e:
        print(f"validate_llm: error: {e}", file=sys.stderr)
        return 2
    if a.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_table(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
