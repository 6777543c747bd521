"""accel-tune llm: a static-batch serving point of a decoder LLM (prefill, decode with a KV cache,
tensor and pipeline parallel) on an accelerator: time to first token, time per output token,
throughput, energy, memory, the per-layer kernels of each phase and the schedule of every
distinct kernel (docs/LLM.md)."""
from __future__ import annotations

import argparse

from tuner.cli import CLIError, print_json
from tuner.cli.common import add_calibration_arg, load_calibration_arg

DTYPES = ("fp32", "fp16", "bf16", "fp8", "int8", "int4")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("llm", help="cost LLM inference: prefill, decode, KV cache, tensor/pipeline parallel",
                       description="Cost a static batch of B sequences: prefill of --input-len tokens, then "
                                   "--output-len - 1 decode steps with the KV cache on the device, on --tp x --pp "
                                   "identical devices. Kernels run at the tuning records' schedules (--log), "
                                   "tuned first with --trials, else at their default schedules.")
    p.add_argument("--model", required=True, metavar="NAME|config.json|FILE.onnx",
                   help="a built-in decoder (`accel-tune models --llm` lists them), a Hugging Face config.json, "
                        "or an ONNX decoder with its KV cache")
    p.add_argument("--hw", required=True, metavar="PRESET|FILE", help="hardware preset or config file")
    p.add_argument("--batch", type=int, required=True, metavar="B", help="sequences in the batch")
    p.add_argument("--input-len", type=int, required=True, metavar="I", help="prompt tokens per sequence")
    p.add_argument("--output-len", type=int, required=True, metavar="O", help="generated tokens per sequence")
    p.add_argument("--tp", type=int, default=1, metavar="N", help="tensor-parallel devices (heads, FFN columns)")
    p.add_argument("--pp", type=int, default=1, metavar="N", help="pipeline stages (layers)")
    p.add_argument("--micro-batches", type=int, default=0, metavar="M",
                   help="pipeline micro-batches (default: min(B, pp))")
    p.add_argument("--dtype", default="fp16", metavar="D",
                   help=f"weights and compute: {', '.join(DTYPES)}; int8/int4 quantize the weights only "
                        f"(fp16 compute). Default fp16")
    p.add_argument("--kv-dtype", default="", metavar="D", help="KV-cache element type (default: the compute type)")
    p.add_argument("--kv-block", type=int, default=256, metavar="TOKENS",
                   help="KV block of the attention kernels (paged/flash attention tile), default 256")
    p.add_argument("--attention", choices=("auto", "fused", "unfused"), default="auto",
                   help="flash-attention-style fused kernel, materialised scores, or fused where the "
                        "on-chip buffer holds one tile (auto)")
    p.add_argument("--decode-attention", choices=("auto", "grouped", "per-head"), default="auto",
                   help="the decode attention kernel: one product per KV head for all its query heads "
                        "(grouped: XQA, FlashDecoding), or one thread block per query head that re-reads its "
                        "KV head through the L2 and computes on the vector unit (per-head: TensorRT-LLM's masked "
                        "MHA, vLLM's paged attention v1); auto (default): grouped for 1-8 or 16 query heads per "
                        "KV head, the groups grouped kernels are built for, else per-head")
    p.add_argument("--log", metavar="FILE", help="tuning records: the fastest schedule of each kernel on this "
                                                 "hardware is used (and --trials appends to it)")
    p.add_argument("--trials", type=int, default=0, metavar="N",
                   help="tune the distinct MAC kernels first with N measurements in all (default 0: no search)")
    add_calibration_arg(p)
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    return p


def _calibration(args, hw):
    """A calibration file (``accel-tune calibrate``) as a wrapper of the serving model's kernel
    coster: each kernel's report scaled by the calibration's factor (``Calibration.kernel_scale``;
    a host file leaves device kernels as they are)."""
    cal = load_calibration_arg(args, hw)
    if cal is None:
        return None
    from sim.graph.subgraph import scaled_report

    def wrap(coster):
        def costed(wl):
            rep, label = coster(wl)
            k = cal.kernel_scale(wl, rep, hw)
            return (rep, label) if k == 1.0 else (scaled_report(rep, k), f"{label}, calibrated x{k:.5g}")
        return costed
    return wrap


def run(args) -> int:
    import sim
    from partition.llm.source import source_for
    from sim.graph.serving import ServingPoint
    from tuner.llm import serve_llm

    for name in ("dtype", "kv_dtype"):
        v = getattr(args, name)
        if v and v not in DTYPES:
            raise CLIError(f"--{name.replace('_', '-')} {v!r} is not one of {', '.join(DTYPES)}")
    if args.trials < 0:
        raise CLIError(f"--trials must be >= 0, got {args.trials}")
    hw = sim.load_hw(args.hw)
    source = source_for(args.model)
    point = ServingPoint(args.batch, args.input_len, args.output_len, tp=args.tp, pp=args.pp,
                         micro_batches=args.micro_batches, dtype=args.dtype, kv_dtype=args.kv_dtype,
                         kv_block=args.kv_block, attention=args.attention,
                         decode_attention=args.decode_attention)
    report = serve_llm(source, hw, point, log=args.log, trials=args.trials, progress=False,
                       calibration=_calibration(args, hw))
    d = report.to_dict()
    d["model_info"] = source.describe()
    if args.json:
        print_json(d)
        return 0
    _print(d)
    return 0


def _bytes(n) -> str:
    if n is None:
        return "-"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _print(d: dict) -> None:
    mem, ph = d["memory"], d["phases"]
    print(f"{d['model']} on {d['hardware']}: batch {d['batch']}, input {d['input_len']}, output {d['output_len']}, "
          f"tp {d['tp']} x pp {d['pp']} = {d['devices']} device(s), {d['dtype']} "
          f"(compute {d['compute_dtype']}, KV {d['kv_dtype']})")
    print(f"  time to first token   {d['ttft_ms']:12.3f} ms")
    steps = ph["decode"]["steps"]
    print(f"  time per output token {d['tpot_ms']:12.3f} ms  " + (
        f"({steps} steps at context {ph['decode']['context_first']}..{ph['decode']['context_last']})" if steps
        else "(no decode step: --output-len 1)"))
    print(f"  end to end            {d['e2e_ms']:12.3f} ms")
    print(f"  throughput            {d['throughput_tok_s']:12.1f} tok/s  ({d['throughput_tok_s_per_device']:.1f} "
          f"per device)")
    print(f"  energy                {d['energy_j_per_token']:12.4f} J/token")
    print(f"  attention             prefill {ph['prefill']['attention_form']}, decode {ph['decode']['attention_form']}"
          f" {ph['decode']['decode_kernel']} (KV blocks of {ph['decode']['kv_block']})")
    if d["pp"] > 1:
        print(f"  pipeline              {d['micro_batches']} micro-batches, decode bubble "
              f"{ph['decode']['pipeline_bubble'] * 100:.1f} %")
    print(f"memory per device: weights {_bytes(mem['weights_bytes'])}, KV {_bytes(mem['kv_bytes'])}, "
          f"activations {_bytes(mem['activation_bytes'])}, peak {_bytes(mem['peak_bytes'])} of "
          f"{_bytes(mem['capacity_bytes']) if mem['capacity_bytes'] else 'capacity not stated'}")
    if mem["capacity_bytes"]:
        print(f"  fits: {'yes' if mem['fits'] else 'NO'}; largest batch that fits {mem['max_batch']}, "
              f"largest context at this batch {mem['max_context']}"
              + ("; weights stream over the host link every pass "
                 f"({ph['weights_stream_s_per_pass'] * 1e3:.2f} ms)" if mem["weights_streamed"] else ""))
    for name in ("prefill", "decode"):
        rows = ph[name]["kernels"]
        of = ph["prefill"].get("kernels_per_layer_of", "")
        what = "the kernels of the whole model (an imported graph)" if of.startswith("the whole") else \
            "the kernels of one layer on one device"
        print(f"{name}: {what}, ms summed over the phase")
        print(f"  {'kernel':<30} {'op':<16} {'total':>11} {'compute':>11} {'memory':>11} {'interconnect':>12}")
        for r in rows:
            print(f"  {r['name'][-30:]:<30} {r['op']:<16} {r['seconds'] * 1e3:11.3f} {r['compute_s'] * 1e3:11.3f} "
                  f"{r['memory_s'] * 1e3:11.3f} {r['interconnect_s'] * 1e3:12.3f}")
    srcs = {}
    for s in d["schedules"]:
        srcs[s["source"]] = srcs.get(s["source"], 0) + 1
    print(f"{len(d['schedules'])} distinct kernels: " + ", ".join(f"{n} {k}" for k, n in srcs.items())
          + f"; calibrated: {'yes' if d['calibrated'] else 'no'}")
