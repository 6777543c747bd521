"""The sweep report: one self-contained HTML file (figures embedded as base64 PNG, no scripts, no
external links) that opens offline.

Figures: the Pareto scatter (latency vs energy, area as colour, the latency-energy-area front
marked), the latency and energy breakdown of the best points, a roofline of the tuned kernels of the
best point, and the search-efficiency curves (best design found vs points evaluated; the gain of tuning over default
schedules per point for the measurements spent). Tables: the front, every point, the spec and
the software versions.

Rows are the ``results.jsonl`` rows the runner writes (see ``evaluate.evaluate_point``).
"""
from __future__ import annotations

import base64
import html
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .pareto import pareto_front
from .runner import RESULTS, objective_matrix, read_rows


class ReportError(ValueError):
    """A folder that holds no sweep results."""


@dataclass(frozen=True)
class Figure:
    id: str
    title: str
    caption: str
    png_b64: str


@dataclass(frozen=True)
class Report:
    html: str
    figures: tuple[Figure, ...]
    points: int
    pareto: tuple[int, ...]


# ---------------------------------------------------------------------------------------- helpers
def _new_fig(w: float = 7.0, h: float = 4.2):
    # The object API, not pyplot: no global figure state, no GUI backend.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure
    fig = MplFigure(figsize=(w, h), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _ok(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("error") is None and r.get("latency_s") is not None]


def _label(r: dict[str, Any]) -> str:
    return f"#{r['index']}"


def _params_text(r: dict[str, Any]) -> str:
    return ", ".join(f"{k.removeprefix('levels.') if k.startswith('levels.') else k.split('.')[-1]}={v}"
                     for k, v in r.get("params", {}).items())


def _scales(ax, x: np.ndarray, y: np.ndarray) -> None:
    """Log axes where the values span more than 20x (else a few points crush the rest), a light grid."""
    if x.max() / max(x.min(), 1e-30) > 20:
        ax.set_xscale("log")
    if y.max() / max(y.min(), 1e-30) > 20:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)


# ---------------------------------------------------------------------------------------- figures
def pareto_figure(rows: list[dict[str, Any]], front: Sequence[int]) -> Figure:
    fig = _new_fig()
    ax = fig.add_subplot()
    lat = np.array([r["latency_s"] * 1e3 for r in rows])
    en = np.array([r["energy_j"] * 1e3 for r in rows])
    area = np.array([r["area_mm2"] for r in rows])
    sc = ax.scatter(lat, en, c=area, cmap="viridis", s=28, alpha=0.85, edgecolors="none")
    fig.colorbar(sc, ax=ax, label="area (mm²)")
    on = np.array([r["index"] in set(front) for r in rows])
    ax.scatter(lat[on], en[on], s=90, facecolors="none", edgecolors="crimson", linewidths=1.4,
               label="latency-energy-area front")
    f2 = pareto_front(np.stack([lat, en], axis=1))
    o = f2[np.argsort(lat[f2])]
    ax.step(lat[o], en[o], where="post", color="crimson", lw=1, alpha=0.6, label="latency-energy front")
    for i in np.flatnonzero(on)[:12]:
        ax.annotate(_label(rows[i]), (lat[i], en[i]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("latency per inference, all models (ms)")
    ax.set_ylabel("energy per inference, all models (mJ)")
    _scales(ax, lat, en)
    ax.legend(fontsize=8, loc="upper right")
    return Figure("pareto", "Pareto front", f"{len(rows)} design points; circled: the {int(on.sum())} "
                  "points no other point beats in latency, energy and area together.", _png(fig))


def area_figure(rows: list[dict[str, Any]], front: Sequence[int]) -> Figure:
    """Area against latency and against energy, every point labelled with its index and the
    values its axes took (the hardware cost of each design beside what it buys)."""
    fig = _new_fig(10.0, 4.4)
    area = np.array([r["area_mm2"] for r in rows])
    on = np.array([r["index"] in set(front) for r in rows])
    labelled = len(rows) <= 40  # beyond that labels overlap into a blot: the front only
    for k, (key, scale, xlabel) in enumerate((("latency_s", 1e3, "latency per inference, all models (ms)"),
                                               ("energy_j", 1e3, "energy per inference, all models (mJ)"))):
        ax = fig.add_subplot(1, 2, k + 1)
        x = np.array([r[key] * scale for r in rows])
        ax.scatter(x[~on], area[~on], s=26, color="C0", alpha=0.8, label="design point")
        ax.scatter(x[on], area[on], s=40, color="crimson", alpha=0.9, label="on the Pareto front")
        for i, r in enumerate(rows):
            if labelled or on[i]:
                text = _label(r) + (f" {_params_text(r)}" if _params_text(r) else "")
                ax.annotate(text[:40], (x[i], area[i]), fontsize=6, xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("area (mm²)")
        _scales(ax, x, area)
        if k == 0:
            ax.legend(fontsize=7, loc="upper right")
    return Figure("area", "Area against latency and energy",
                  f"{len(rows)} design points, labelled with their index and the values of the swept fields "
                  f"(per-level sizes, bandwidths and fan-outs on a hierarchical machine); red: the "
                  f"latency-energy-area Pareto front.", _png(fig))


def best_points(rows: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The points worth a closer look: fastest, least energy, lowest EDP, smallest area."""
    picks = [("fastest", min(rows, key=lambda r: r["latency_s"])),
             ("least energy", min(rows, key=lambda r: r["energy_j"])),
             ("lowest EDP", min(rows, key=lambda r: r["edp"])),
             ("smallest", min(rows, key=lambda r: (r["area_mm2"], r["latency_s"])))]
    out, seen = [], set()
    for name, r in picks:
        if r["index"] in seen:
            out = [(f"{n}, {name}" if rr["index"] == r["index"] else n, rr) for n, rr in out]
            continue
        seen.add(r["index"])
        out.append((name, r))
    return out


def _components(r: dict[str, Any], what: str) -> dict[str, float]:
    """Latency or energy by component, summed over the models of one row."""
    tot: dict[str, float] = {}
    for m in r.get("models", {}).values():
        for comp, v in (m.get("breakdown") or {}).items():
            x = v.get(what) if isinstance(v, dict) else None
            if isinstance(x, (int, float)):
                tot[comp] = tot.get(comp, 0.0) + float(x)
    return tot


def breakdown_figure(rows: list[dict[str, Any]]) -> Figure | None:
    picks = best_points(rows)
    comps: list[str] = []
    for _, r in picks:
        for what in ("latency_s", "energy_j"):
            comps += [c for c in _components(r, what) if c not in comps]
    if not comps:
        return None
    fig = _new_fig(8.0, 3.8)
    axes = fig.subplots(1, 2)
    names = [f"{_label(r)}\n{n}" for n, r in picks]
    colors = {c: f"C{i}" for i, c in enumerate(comps)}
    for ax, what, unit, scale in ((axes[0], "latency_s", "ms", 1e3), (axes[1], "energy_j", "mJ", 1e3)):
        bottom = np.zeros(len(picks))
        for c in comps:
            vals = np.array([_components(r, what).get(c, 0.0) * scale for _, r in picks])
            ax.bar(names, vals, bottom=bottom, label=c, color=colors[c])
            bottom += vals
        ax.set_ylabel(f"{what.split('_')[0]} ({unit})")
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    axes[1].legend(fontsize=7, loc="upper right")
    return Figure("breakdown", "Where the time and energy go",
                  "Latency and energy of the best points, by component (host ops, link transfers, "
                  "launches, accelerator), summed over the models.", _png(fig))


def roofline_figure(rows: list[dict[str, Any]]) -> Figure | None:
    best = min(rows, key=lambda r: r["latency_s"])
    ks = [k for m in best.get("models", {}).values() for k in (m.get("kernels") or [])
          if k.get("macs") and k.get("cycles") and k.get("dram_bytes") is not None]
    if not ks:
        return None
    peak = best["peak_gmacs"]
    bw = best.get("dram_gb_per_s")
    fig = _new_fig(6.5, 4.2)
    ax = fig.add_subplot()
    ai = np.array([k["macs"] / max(k["dram_bytes"], 1) for k in ks])
    perf = np.array([k["macs"] / (k["cycles"] / (best["clock_mhz"] * 1e6)) / 1e9 for k in ks])
    ops = sorted({k.get("op", "?") for k in ks})
    for j, op in enumerate(ops):
        sel = np.array([k.get("op", "?") == op for k in ks])
        ax.scatter(ai[sel], perf[sel], s=22, color=f"C{j}", label=op, alpha=0.85)
    x = np.logspace(math.log10(max(ai.min() / 4, 1e-3)), math.log10(ai.max() * 4), 200)
    if bw:
        ax.plot(x, np.minimum(peak, bw * x), color="k", lw=1.2, label="roofline")
    ax.axhline(peak, color="k", ls=":", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (MACs per DRAM byte)")
    ax.set_ylabel("achieved GMAC/s")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return Figure("roofline", "Roofline of the tuned kernels",
                  f"Every tuned kernel of the fastest point ({_label(best)}: {_params_text(best)}); "
                  f"peak {peak:.3g} GMAC/s" + (f", DRAM {bw:.3g} GB/s" if bw else "")
                  + "; DRAM bytes are what each kernel moves inside its function (intermediates kept on chip "
                    "excluded).", _png(fig))


def _tuning_gain(r: dict[str, Any]) -> float:
    """Latency with default schedules over latency with the tuned ones (same partition), summed
    over the models; NaN when the plan carries no such baseline."""
    base = tuned = 0.0
    for m in r.get("models", {}).values():
        b = (m.get("summary") or {}).get("default_schedules_latency_s")
        if not isinstance(b, (int, float)):
            return math.nan
        base += b
        tuned += m["latency_s"]
    return base / tuned if tuned > 0 else math.nan


def search_figure(rows: list[dict[str, Any]], objective: str) -> Figure:
    """In evaluation order (the order of ``results.jsonl``): the best design found so far, and
    what tuning gained on each point for the measurements it spent."""
    col = {"latency": "latency_s", "energy": "energy_j", "edp": "edp"}[objective]
    vals = np.array([r[col] for r in rows], dtype=float)
    best = np.minimum.accumulate(vals)
    meas = np.array([sum(m.get("measurements", 0) or 0 for m in r.get("models", {}).values()) for r in rows])
    seeds = np.array([sum(m.get("warm_start_seeds", 0) or 0 for m in r.get("models", {}).values()) for r in rows])
    gain = np.array([_tuning_gain(r) for r in rows])
    fig = _new_fig(8.0, 3.6)
    a1, a2 = fig.subplots(1, 2)
    n = np.arange(1, len(rows) + 1)
    a1.plot(n, best / best[-1], marker=".", lw=1.2)
    a1.set_xlabel("design points evaluated")
    a1.set_ylabel(f"best {objective} so far / final best")
    a1.grid(alpha=0.3)
    if np.isfinite(gain).any():
        a2.bar(n, gain, color="C2", label="tuned vs default schedules")
        a2.axhline(1.0, color="k", lw=0.8)
        a2.set_ylabel("latency gain of tuning (x)")
    a3 = a2.twinx()
    a3.plot(n, meas, color="C1", marker=".", lw=1, label="measurements")
    if seeds.any():
        a3.plot(n, seeds, color="C4", marker=".", lw=1, label="of which warm-start seeds")
    a3.set_ylabel("simulator measurements")
    a3.set_ylim(bottom=0)
    a3.legend(fontsize=7, loc="lower right")
    a2.set_xlabel("design point (evaluation order)")
    a2.grid(axis="y", alpha=0.3)
    return Figure("search", "Search efficiency",
                  f"Left: how fast the sweep finds its best design. Right: what schedule tuning gained "
                  f"over default schedules on each point (bars) for the measurements it spent "
                  f"({meas.mean():.0f} per point on average; warm-start seeds are measurements of the "
                  f"nearest finished point's best schedules on the new hardware).", _png(fig))


# ---------------------------------------------------------------------------------------- tables
def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if v is None:
        return ""
    return str(v)


def _table(header: list[str], body: list[list[Any]]) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in header)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{rows}</tbody></table>"


def points_table(rows: list[dict[str, Any]], labels: list[str], front: set[int]) -> str:
    params = []
    for r in rows:
        params += [p for p in r.get("params", {}) if p not in params]
    header = ["#", "front"] + params + ["area mm²", "latency ms", "energy mJ", "EDP mJ·ms"]
    header += [f"{lab} ms" for lab in labels] + [f"{lab} util" for lab in labels] + ["eval s", "error"]
    body = []
    for r in sorted(rows, key=lambda r: (r.get("latency_s") is None, r.get("latency_s") or 0)):
        ms = r.get("models", {})
        lat = r.get("latency_s")
        body.append([r["index"], "★" if r["index"] in front else ""]
                    + [json.dumps(r["params"][p]) if isinstance(r.get("params", {}).get(p), list)
                       else r.get("params", {}).get(p) for p in params]
                    + [r["area_mm2"], lat * 1e3 if lat is not None else None,
                       r["energy_j"] * 1e3 if r.get("energy_j") is not None else None,
                       r["edp"] * 1e6 if r.get("edp") is not None else None]
                    + [ms.get(lab, {}).get("latency_s", math.nan) * 1e3 for lab in labels]
                    + [ms.get(lab, {}).get("utilization") for lab in labels]
                    + [r.get("eval_s"), r.get("error") or ""])
    return _table(header, body)


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;color:#222;padding:0 1em}h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}th,td{border:1px solid #ccc;padding:2px 6px;
text-align:right}th{background:#f2f2f2}figure{margin:1em 0}figcaption{font-size:13px;color:#555}
img{max-width:100%}pre{background:#f7f7f7;padding:.6em;font-size:11px;overflow-x:auto}.meta{color:#555}"""


def llm_figure(rows: list[dict[str, Any]]) -> Figure | None:
    """LLM serving points (``[[models]]`` with ``llm``): throughput against time to first token,
    and peak device memory against batch (the device's capacity drawn as a line)."""
    pts = [(r, m["llm"]) for r in rows for m in r.get("models", {}).values() if isinstance(m.get("llm"), dict)]
    if not pts:
        return None
    fig = _new_fig(8.0, 3.8)
    a1, a2 = fig.subplots(1, 2)
    models = sorted({p["model"] for _, p in pts})
    for i, name in enumerate(models):
        sel = [(r, p) for r, p in pts if p["model"] == name]
        fits = np.array([bool(p["memory"]["fits"]) for _, p in sel])
        x = np.array([p["ttft_ms"] for _, p in sel])
        y = np.array([p["throughput_tok_s"] for _, p in sel])
        a1.scatter(x[fits], y[fits], s=14, color=f"C{i}", label=name)
        a1.scatter(x[~fits], y[~fits], s=14, facecolors="none", edgecolors=f"C{i}")
        b = np.array([p["batch"] for _, p in sel])
        mem = np.array([p["memory"]["peak_bytes"] / 2**30 for _, p in sel])
        a2.scatter(b[fits], mem[fits], s=14, color=f"C{i}", label=name)
        a2.scatter(b[~fits], mem[~fits], s=14, facecolors="none", edgecolors=f"C{i}")
    caps = {p["memory"]["capacity_bytes"] for _, p in pts if p["memory"]["capacity_bytes"]}
    for c in caps:
        a2.axhline(c / 2**30, color="0.5", lw=0.8, ls="--")
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("time to first token (ms)")
    a1.set_ylabel("throughput (tokens/s)")
    a2.set_xscale("log", base=2)
    a2.set_yscale("log")
    a2.set_xlabel("batch")
    a2.set_ylabel("peak memory per device (GiB)")
    for ax in (a1, a2):
        ax.grid(alpha=0.3)
    a1.legend(fontsize=7)
    return Figure("llm", "LLM serving points",
                  "Throughput against time to first token, and peak device memory against batch, for every "
                  "serving point of every design point (hollow: does not fit; dashed: device capacity).",
                  _png(fig))


FIGURES = ("pareto", "area", "breakdown", "roofline", "search", "llm")


def build_report(rows: Sequence[dict[str, Any]], spec: dict[str, Any] | None = None,
                 versions: dict[str, Any] | None = None, title: str | None = None,
                 on_figure: Callable[[str], None] | None = None) -> Report:
    """The report of a sweep's rows. ``on_figure`` is told each figure before it is drawn (the
    slow part: a progress bar)."""
    rows = list(rows)
    seen: dict[int, str] = {}
    for r in rows:
        if seen.setdefault(r["index"], r["point"]) != r["point"]:
            # Two machines under one index: rows of two sweeps (an older accel-tune let a folder
            # be reused with another base); one report of both would be one wrong design space.
            raise ReportError(f"design point {r['index']} appears with two different machines: the rows "
                              f"come from more than one sweep; rerun the sweep into a fresh folder")
    ok = _ok(rows)
    if not ok:
        raise ReportError("no successfully evaluated design point to report")
    spec = spec or {}
    labels = sorted({lab for r in ok for lab in r.get("models", {})})
    front_idx = pareto_front(objective_matrix(ok))
    front = tuple(ok[i]["index"] for i in front_idx)
    objective = spec.get("objective", "latency")
    makers = {"pareto": lambda: pareto_figure(ok, front), "area": lambda: area_figure(ok, front),
              "breakdown": lambda: breakdown_figure(ok),
              "roofline": lambda: roofline_figure(ok), "search": lambda: search_figure(ok, objective),
              "llm": lambda: llm_figure(ok)}
    figs = []
    for fid in FIGURES:
        if on_figure is not None:
            on_figure(f"{fid} figure")
        f = makers[fid]()
        if f is not None:  # a figure without data is left out
            figs.append(f)
    name = title or spec.get("name", "sweep")
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>accel-tune sweep: "
             f"{html.escape(name)}</title><style>{_CSS}</style></head><body>",
             f"<h1>Sweep report: {html.escape(name)}</h1>",
             f"<p class='meta'>{html.escape(spec.get('description', ''))}</p>",
             f"<p>{len(ok)} design points evaluated ({len(rows) - len(ok)} could not run), "
             f"{len(front)} on the latency-energy-area Pareto front; base "
             f"<code>{html.escape(str(spec.get('base', '?')))}</code>, objective {html.escape(objective)}, "
             f"models: {html.escape(', '.join(labels))}.</p>"]
    for f in figs:
        parts.append(f"<h2>{html.escape(f.title)}</h2><figure id='fig-{f.id}'>"
                     f"<img alt='{html.escape(f.title)}' src='data:image/png;base64,{f.png_b64}'>"
                     f"<figcaption>{html.escape(f.caption)}</figcaption></figure>")
    parts.append("<h2>Best points</h2>")
    parts.append(_table(["pick", "#", "parameters", "area mm²", "latency ms", "energy mJ"],
                        [[n, r["index"], _params_text(r), r["area_mm2"], r["latency_s"] * 1e3,
                          r["energy_j"] * 1e3] for n, r in best_points(ok)]))
    parts.append("<h2>Pareto front</h2>")
    parts.append(points_table([r for r in ok if r["index"] in set(front)], labels, set(front)))
    parts.append("<h2>All points</h2>")
    parts.append(points_table(rows, labels, set(front)))
    parts.append("<h2>Spec</h2><pre>" + html.escape(json.dumps(
        {k: v for k, v in spec.items() if k != "base_hw"}, indent=2)) + "</pre>")
    if versions:
        parts.append("<h2>Software</h2><pre>" + html.escape(json.dumps(versions, indent=2)) + "</pre>")
    parts.append("</body></html>\n")
    return Report("".join(parts), tuple(figs), len(ok), front)


def report_dir(sweep_dir: str | Path, out: str | Path | None = None,
               on_figure: Callable[[str], None] | None = None) -> tuple[Path, Report]:
    """Read a sweep folder and write its report (default ``<dir>/report.html``)."""
    d = Path(sweep_dir)
    if not (d / RESULTS).exists():
        raise ReportError(f"{d} holds no {RESULTS} (run accel-tune sweep first)")
    rows = read_rows(d / RESULTS)
    spec = json.loads((d / "spec.json").read_text()) if (d / "spec.json").exists() else {}
    ver = json.loads((d / "version.json").read_text()) if (d / "version.json").exists() else {}
    # A rerun after a spec edit may leave rows of other settings; report this sweep's own.
    settings = spec.get("settings")
    if settings is not None:
        from .space import eval_key
        blob = json.dumps(settings, sort_keys=True)
        rows = [r for r in rows if r["key"] == eval_key(r["point"], blob)]
    rep = build_report(rows, spec, ver, on_figure=on_figure)
    path = Path(out) if out else d / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rep.html)
    return path, rep
