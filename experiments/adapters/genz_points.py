"""GenZ (pip ``genz-llm``) at its defaults on measured points; run with GenZ's own interpreter.

    /work/venvs/genz/bin/python experiments/adapters/genz_points.py < points.json > results.json

Reads a JSON list of points and prints one JSON list, one entry per point, each ``{"value": ...}``
or ``{"skip": reason}``:
- ``{"kind": "matmul", "M", "K", "N"}``: GenZ's GEMM operator on its ``A100_80GB_GPU`` system
  (312 TFLOP/s, 2,039 GB/s), bf16 (GenZ's 2-byte type), latency in seconds;
- ``{"kind": "softmax", ...}`` and other vector ops: skipped (GenZ's LLM models have no such operator);
- ``{"kind": "serving", "model", "batch", "input_len", "tp", "metric": "ttft_ms"}``: GenZ's
  ``prefill_moddeling`` latency in ms (its time to first token).
GenZ imports nothing of accel-tune and accel-tune nothing of GenZ: their dependencies may clash.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys

# accel-tune's model names -> GenZ's (a model GenZ does not define is skipped)
GENZ_MODELS = {"llama-2-7b": "llama2_7b", "llama-2-13b": "meta-llama/Llama-2-13B", "llama-2-70b": "llama2_70b",
               "gpt2": "openai/gpt2"}


def main() -> int:
    points = json.load(sys.stdin)
    with contextlib.redirect_stdout(io.StringIO()):  # GenZ prints as it imports
        from GenZ import prefill_moddeling
        from GenZ.analyse_model import analysis_model
        from GenZ.LLM_inference.utils import get_inference_system
        from GenZ.Models.utils import OpType, ResidencyInfo
    out = []
    for p in points:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                if p["kind"] == "matmul":
                    system = get_inference_system(system_name="A100_80GB_GPU", bits="bf16")
                    # GenZ's GEMM: input (B, K, N) x weight (M, K) -> (B, M, N)
                    df = analysis_model([["mm", 1, p["N"], p["M"], p["K"], ResidencyInfo.All_offchip, OpType.GEMM]],
                                        system)
                    out.append({"value": float(df.iloc[0]["Latency (msec)"]) * 1e-3})
                elif p["kind"] == "serving":
                    name = GENZ_MODELS.get(p["model"])
                    if name is None or p.get("metric") != "ttft_ms":
                        out.append({"skip": f"{p['model']} is not a GenZ model" if name is None else "metric"})
                        continue
                    r = prefill_moddeling(model=name, batch_size=p["batch"], input_tokens=p["input_len"],
                                          system_name="A100_80GB_GPU", bits="bf16", tensor_parallel=p.get("tp", 1))
                    out.append({"value": float(r["Latency"])})
                else:
                    out.append({"skip": f"GenZ has no {p['kind']} operator"})
        except Exception as e:  # one point GenZ refuses must not lose the others
            out.append({"skip": f"GenZ: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"})
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
