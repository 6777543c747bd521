"""Does the learned cost model pay for MAPPINGS? Time and measurements to within 1 % of the best
multi-level mapping, in two measurement regimes, for five ways of searching (issue 13 item 3).

Problems: the oracle's ``timeloop-mapper`` cases (their processed inputs, constraints and metric,
without Timeloop's mapping) and layers of built-in models on hierarchical presets (``--presets``,
metric ``--layer-metric``).

Regimes (the measured numbers are the same in both: the tile-level walk, ``sim.cost.walk``):

- ``builtin``: the measurer called in process;
- ``external``: experiments/adapters/map_measurer.py through ``tuner.search.map_measure.MapCommandMeasurer``,
  one process per mapping (a Timeloop mapping file written, Python started, the problem read, the
  walk run); the bench prints the mean seconds per call and fails if it is under 50 ms.

Strategies, each with the same budget of measurements per (problem, seed):

- ``random``: legal mappings sampled from the mapspace, measured in turn;
- ``no-model``: the evolutionary mapping search (``tuner.search.mapsearch``) with the measurement as its
  fitness (population budget/4);
- ``prior``: the analytical search (``tuner.search.mapper.search_mapping``, ``--search-budget``
  evaluations of the closed form) keeps its best 4 x budget mappings, and those are measured in
  the analytical order (``map_learn.measure_guided``, ``never``), as ``tune --timeloop
  --measure-command`` does;
- ``model``: the same with XGBoost trained on what was measured and ranking the rest after every
  round (``always``);
- ``auto``: the same under the policy (``tuner.search.policy``).

The analytical search is run once per (problem, seed) and its seconds are charged to each of the
three strategies that use it (it is deterministic). The best per problem is the best of every
measurement any run made and of a reference run: the analytical top ``--ref-pool`` of a search of
``--ref-budget`` evaluations, all measured in process. Time is wall time from the start of a
strategy to its first measurement within 1 % of the best (on the metric: EDP, cycles or energy); a
run that never gets there counts its whole duration and ``budget + 1`` measurements. CPU time of
this process (``time.process_time``) and the machine's load are recorded too: the machine is
shared.

    python experiments/bench/mapping_regimes.py [--oracle ../shared/oracle/timeloop] [--cases ID ...]
        [--presets eyeriss simba-like] [--layers NAME ...] [--regimes builtin external] [--seeds 0 1 2]
        [--budget-builtin 64] [--budget-external 24] [--search-budget 20000]
        [--json] [--out DIR]

Writes config.json, runs.json (every run with its trace) and table.md to DIR (default
experiments/results/mapping_regimes/).
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "experiments" / "adapters" / "map_measurer.py"
sys.path.insert(0, str(ADAPTER.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from map_measurer import load_problem, measure_fn  # noqa: E402

MEASURER = "walk"   # the tile-level walk, sim.cost.walk
from model_regimes import summarize, table, time_to  # noqa: E402  (the schedule benchmark's summary)
from search_quality import DEFAULT_LAYERS  # noqa: E402

STRATEGIES = ("random", "no-model", "prior", "auto", "model")   # auto before model: see summary notes
GUIDED = {"prior": "never", "model": "always", "auto": "auto"}
DEFAULT_PRESETS = ("eyeriss", "simba-like")
DEFAULT_LAYERS_HERE = ("resnet50.res2.3x3", "bert_base.ffn2")


@dataclass
class Problem:
    name: str
    spec: dict            # what the external adapter reads (written to spec_path)
    spec_path: Path
    hier: object = None
    nest: object = None
    constraints: tuple = ()
    metric: str = "edp"

    def load(self) -> "Problem":
        self.hier, self.nest, self.constraints, self.metric = load_problem(self.spec)
        return self


def primary(metric: str, cycles: float, energy: float) -> float:
    return {"delay": cycles, "energy": energy, "edp": cycles * energy}[metric]


class InProcess:
    """The measurer called in this process on a ``sim.mapping.mapping.Mapping``."""

    def __init__(self, prob: Problem, name: str):
        self.prob, self.fn = prob, measure_fn(name)

    def measure(self, mapping) -> tuple[float, float]:
        return self.fn(self.prob.hier, self.prob.nest, mapping)


class External:
    """The adapter in a fresh process per mapping, through ``MapCommandMeasurer``. ``inexpressible``
    counts mappings whose Timeloop mapping file does not read back to the same mapping (a dim
    split over both X and Y at one level has no Timeloop spelling): the command measures what the
    file says, which is then not the mapping the search chose."""

    def __init__(self, prob: Problem):
        from sim.timeloop import mapping_yaml
        from tuner.search.map_measure import MapCommandMeasurer
        self.prob, self.yaml = prob, mapping_yaml
        self.cmd = MapCommandMeasurer((sys.executable, str(ADAPTER), str(prob.spec_path)), timeout_s=120)
        self.inexpressible = 0

    def measure(self, mapping) -> tuple[float, float]:
        import yaml
        from sim.timeloop.mapping import read_mapping
        text = self.yaml(self.prob.hier, self.prob.nest, mapping)
        self.inexpressible += not same_mapping(self.prob, mapping,
                                               read_mapping(yaml.safe_load(text)["mapping"], self.prob.hier, self.prob.nest))
        return self.cmd.measure(text)


def same_mapping(prob: Problem, a, b) -> bool:
    """Whether two mappings are one point of the mapspace (its keys: factors, the order of the
    non-unit loops, keep bits); a mapping outside the space (illegal) is not the same."""
    from sim.mapping.mapspace import MapspaceError
    from sim.mapping.mapping import MappingError
    from sim.mapping.mapspace_sim import build_space, from_mapping
    space = build_space(prob.hier, prob.nest, spatial_one_axis=True)
    try:
        rows = np.stack([from_mapping(space, prob.hier, a), from_mapping(space, prob.hier, b)])
    except (MapspaceError, MappingError):
        return False
    k = space.keys(rows)
    return bool(space.valid(rows[1:])[0]) and k[0].tobytes() == k[1].tobytes()


@dataclass
class Recorder:
    """Wraps a measurer: every measurement's metric value and wall seconds since ``t0`` (plus an
    offset: time spent before the strategy's clock started, e.g. the shared analytical search)."""
    inner: object
    metric: str
    offset_s: float = 0.0
    t0: float = field(default_factory=time.perf_counter)
    trace: list = field(default_factory=list)
    trace_s: list = field(default_factory=list)
    measure_s: float = 0.0

    def measure(self, mapping) -> tuple[float, float]:
        t = time.perf_counter()
        c, e = self.inner.measure(mapping)
        now = time.perf_counter()
        self.measure_s += now - t
        self.trace.append(primary(self.metric, c, e))
        self.trace_s.append(self.offset_s + now - self.t0)
        return c, e


def run_random(prob: Problem, space, rec: Recorder, budget: int, seed: int) -> dict:
    from sim.cost.engines import batch as mb
    rng = np.random.default_rng(seed)
    seen: set[bytes] = set()
    tries = 0
    while len(rec.trace) < budget and tries < 50:
        tries += 1
        rows = space.sample(4 * budget, rng)
        a = space.arrays(rows)
        ok = mb.check_batch(prob.hier, prob.nest, a) == mb.OK
        for b, k in enumerate(space.keys(rows)):
            if len(rec.trace) >= budget:
                break
            if ok[b] and k.tobytes() not in seen:
                seen.add(k.tobytes())
                rec.measure(a.mapping(prob.hier, prob.nest, b))
    return {}


def run_no_model(prob: Problem, space, rec: Recorder, budget: int, seed: int) -> dict:
    from sim.cost.engines import batch as mb
    from tuner.search.mapsearch import Costs, MapSearchConfig, search

    def evaluate(a):
        ok = mb.check_batch(prob.hier, prob.nest, a) == mb.OK
        cyc, en = np.full(len(a), np.inf), np.full(len(a), np.inf)
        for b in np.flatnonzero(ok):
            cyc[b], en[b] = rec.measure(a.mapping(prob.hier, prob.nest, int(b)))
        return Costs(cyc, en)
    res = search(space, evaluate, prob.metric, MapSearchConfig(evaluations=budget, seed=seed,
                                                                population=max(4, budget // 4)))
    return {"generations": res.generations}


@dataclass(frozen=True)
class Pool:
    """The analytical search's best mappings, their features and prior (shared by the guided runs)."""
    mappings: list
    X: np.ndarray
    prior: np.ndarray
    seconds: float
    evaluations: int


def analytical_pool(prob: Problem, search_budget: int, size: int, seed: int) -> Pool:
    from tuner.search.map_learn import log_metric, mapping_features
    from tuner.search.mapper import movement_evaluator, search_mapping
    t0 = time.perf_counter()
    space, res = search_mapping(prob.hier, prob.nest, prob.metric, budget=search_budget,
                                constraints=prob.constraints, seed=seed, keep_top=size,
                                spatial_one_axis=True)
    a = space.arrays(res.top)
    c = movement_evaluator(prob.hier, prob.nest, space)(a)
    maps = [a.mapping(prob.hier, prob.nest, b) for b in range(len(a))]
    X = mapping_features(prob.hier, prob.nest, a)
    prior = log_metric(prob.metric, c.cycles, c.energy_pj)
    return Pool(maps, X, prior, time.perf_counter() - t0, res.evaluations)


def run_guided(prob: Problem, pool: Pool, rec: Recorder, budget: int, use: str) -> dict:
    from tuner.search.map_learn import measure_guided
    from tuner.search.policy import ModelPolicy
    g = measure_guided(rec, pool.mappings, pool.X, pool.prior, prob.metric, budget, max(1, budget // 4),
                       ModelPolicy(use=use))
    return {"fits": g.fits, "train_s": g.train_s, "rounds_ranked_by_model": g.rounds_ranked_by_model,
            "last_decision": g.last_decision, "search_s": pool.seconds, "pool": len(pool.mappings)}


def with_summary_keys(r: dict) -> dict:
    """A run with the keys ``model_regimes.summarize`` reads (its layer is our problem)."""
    return {**r, "layer": r["problem"], "timing": {"measurements": len(r["trace"]), "measure_s": r["measure_s"],
                                                   "train_s": r.get("train_s", 0.0), "fits": r.get("fits", 0)}}


def per_problem(runs: list[dict], best: dict[str, float]) -> str:
    """Measurements to 1 % per problem and strategy (median over seeds; '-' = never)."""
    probs = list(dict.fromkeys(r["problem"] for r in runs))
    regimes = list(dict.fromkeys(r["regime"] for r in runs))
    out = ["| regime | problem | " + " | ".join(STRATEGIES) + " |", "|---|---|" + "---|" * len(STRATEGIES)]
    for reg in regimes:
        for p in probs:
            cells = []
            for s in STRATEGIES:
                mine = [r for r in runs if r["regime"] == reg and r["problem"] == p and r["strategy"] == s]
                if not mine:
                    cells.append("")
                    continue
                ks = [time_to(r["trace"], r["trace_s"], 1.01 * best[p], r["wall_s"])[1] for r in mine]
                got = [k for k in ks if k is not None]
                fits = sum(r.get("fits", 0) for r in mine)
                cell = f"{statistics.median(got):g} ({len(got)}/{len(ks)})" if got else f"- (0/{len(ks)})"
                cells.append(cell + (f", {fits} fits" if fits else ""))
            if any(cells):      # a problem this regime did not run (--external-problems) has no row
                out.append(f"| {reg} | {p} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def before_after(before: list[dict], after: list[dict], best: dict[str, float]) -> str:
    """The same summary for an earlier run (``--before DIR``, e.g. before a change to the tuner) and
    this one, on the runs both made (same regime, problem, seed, strategy) and one best per problem
    (over both runs and the reference)."""
    key = lambda r: (r["regime"], r["problem"], r["seed"], r["strategy"])
    common = {key(r) for r in before} & {key(r) for r in after}
    out = ["| regime | strategy | run | reached 1 % | median measurements to 1 % | median s to 1 % | "
           "median final / best | training share | fits |", "|---|---|---|---|---|---|---|---|---|"]
    rows = {name: summarize([r for r in runs if key(r) in common], best) for name, runs in (("before", before), ("after", after))}
    for b, a in zip(rows["before"], rows["after"]):
        for name, r in (("before", b), ("after", a)):
            out.append(f"| {r['regime']} | {r['strategy']} | {name} | {r['reached']}/{r['runs']} | "
                       f"{r['median_measurements_to_1pct']:g} | {r['median_s_to_1pct']:.2f} | {r['median_final_ratio']:.4f} | "
                       f"{100 * r['train_share']:.1f} % | {r['fits']} |")
    # the medians hide single runs: every run whose final result changed
    old, new = {key(r): r for r in before}, {key(r): r for r in after}
    changed = [k for k in sorted(common) if min(old[k]["trace"]) != min(new[k]["trace"])]
    out += ["", "Runs whose final / best changed:", "", "| regime | problem | seed | strategy | before | after |",
            "|---|---|---|---|---|---|"]
    out += [f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {min(old[k]['trace']) / best[k[1]]:.4f} | "
            f"{min(new[k]['trace']) / best[k[1]]:.4f} |" for k in changed]
    return "\n".join(out)


def problems(a, tmp: Path) -> list[Problem]:
    out = []
    if a.oracle:
        from sim.validate.timeloop import load_case, write_inputs
        for p in sorted(Path(a.oracle).glob("*.json")):
            case = load_case(p)
            if case.get("tool") != "timeloop-mapper" or (a.cases and case["case_id"] not in a.cases):
                continue
            files = write_inputs(case, "processed", tmp / case["case_id"])
            spec = {"measurer": MEASURER, "timeloop": [str(f) for f in files if not f.name.endswith(".map.yaml")]}
            out.append(Problem(case["case_id"], spec, tmp / f"{case['case_id']}.json"))
    by_name = {L["name"]: L for L in DEFAULT_LAYERS}
    for hw in a.presets:
        for name in a.layers:
            spec = {"measurer": MEASURER, "hw": hw, "layer": by_name[name], "metric": a.layer_metric}
            out.append(Problem(f"{hw}:{name}", spec, tmp / f"{hw}_{name}.json"))
    for p in out:
        p.load()
        # the adapter reads the parsed problem back (a Timeloop input's YAML would cost it seconds)
        pk = p.spec_path.with_suffix(".pickle")
        pk.write_bytes(pickle.dumps((p.hier, p.nest)))
        p.spec_path.write_text(json.dumps({"measurer": MEASURER, "pickle": str(pk), "metric": p.metric}))
    return out


def reference_best(prob: Problem, a) -> float:
    pool = analytical_pool(prob, a.ref_budget, a.ref_pool, seed=1000)
    m = InProcess(prob, MEASURER)
    return min(primary(prob.metric, *m.measure(x)) for x in pool.mappings)


def run_all(a) -> tuple[list[dict], dict[str, float], dict]:
    """Every (regime, problem, seed, strategy) run, the best per problem and the configuration."""
    load0 = os.getloadavg()
    t_bench, cpu_bench = time.perf_counter(), time.process_time()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        probs = problems(a, Path(tmp))
        if not probs:
            raise SystemExit("mapping_regimes: error: no problems (no mapper cases and no layers)")
        # warm-up: the batched model's first call compiles (numba) and would land on one strategy
        analytical_pool(probs[0], 200, 8, 0)
        best = {}
        for p in probs:
            t = time.perf_counter()
            best[p.name] = reference_best(p, a)
            print(f"reference {p.name}: {best[p.name]:.6g} ({time.perf_counter() - t:.1f} s)", file=sys.stderr, flush=True)
        for regime in a.regimes:
            budget = a.budget_builtin if regime == "builtin" else a.budget_external
            for p in probs:
                if regime == "external" and a.external_problems is not None and p.name not in a.external_problems:
                    continue
                for seed in a.seeds:
                    pool = None
                    for s in a.strategies:
                        inner = InProcess(p, MEASURER) if regime == "builtin" else External(p)
                        cpu0 = time.process_time()
                        if s in GUIDED:
                            if pool is None:
                                pool = analytical_pool(p, a.search_budget, 4 * budget, seed)
                            rec = Recorder(inner, p.metric, offset_s=pool.seconds)
                            extra = run_guided(p, pool, rec, budget, GUIDED[s])
                        else:
                            rec = Recorder(inner, p.metric)
                            # the space is the one the analytical search uses (same constraints)
                            from sim.mapping.mapspace_sim import build_space
                            space = build_space(p.hier, p.nest, tuple(p.constraints), spatial_one_axis=True)
                            extra = (run_random if s == "random" else run_no_model)(p, space, rec, budget, seed)
                        wall = rec.offset_s + time.perf_counter() - rec.t0
                        r = {"problem": p.name, "regime": regime, "strategy": s, "seed": seed, "budget": budget,
                             "metric": p.metric, "trace": rec.trace, "trace_s": rec.trace_s, "wall_s": wall,
                             "cpu_s": time.process_time() - cpu0, "measure_s": rec.measure_s,
                             "inexpressible": getattr(inner, "inexpressible", 0), **extra}
                        runs.append(r)
                        print(f"  {regime:8s} {p.name:34s} seed {seed} {s:8s} best x{min(rec.trace) / best[p.name]:.4f} "
                              f"in {wall:.2f} s ({len(rec.trace)} measured, {extra.get('fits', 0)} fits)",
                              file=sys.stderr, flush=True)
    for r in runs:
        best[r["problem"]] = min(best[r["problem"]], min(r["trace"]))
    config = {"measurer": MEASURER, "measurer_note": "the tile-level walk, sim.cost.walk",
              "problems": [{"name": p.name, "metric": p.metric, "spec": {k: v for k, v in p.spec.items() if k != "timeloop"}}
                           for p in probs],
              "seeds": a.seeds, "budget_builtin": a.budget_builtin, "budget_external": a.budget_external,
              "search_budget": a.search_budget, "external_problems": a.external_problems, "ref_budget": a.ref_budget, "ref_pool": a.ref_pool,
              "strategies": a.strategies, "regimes": a.regimes, "layer_metric": a.layer_metric,
              "external_command": [os.path.relpath(sys.executable, ROOT), str(ADAPTER.relative_to(ROOT)), "PROBLEM.json"],
              "python": platform.python_version(), "cpus": os.cpu_count(), "load_before": load0,
              "load_after": os.getloadavg(), "bench_s": time.perf_counter() - t_bench,
              "bench_cpu_s": time.process_time() - cpu_bench, "best": best}
    return runs, best, config


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--oracle", default=str(ROOT.parent / "shared" / "oracle" / "timeloop"),
                    help="folder of Timeloop oracle cases ('' for none)")
    ap.add_argument("--cases", nargs="*", default=[], help="only these mapper case ids")
    ap.add_argument("--presets", nargs="*", default=list(DEFAULT_PRESETS))
    ap.add_argument("--layers", nargs="*", default=list(DEFAULT_LAYERS_HERE))
    ap.add_argument("--layer-metric", default="edp", choices=["edp", "delay", "energy"])
    ap.add_argument("--regimes", nargs="+", default=["builtin", "external"], choices=["builtin", "external"])
    ap.add_argument("--external-problems", nargs="*", default=None,
                    help="run the external regime on these problems only (default: all)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--budget-builtin", type=int, default=64)
    ap.add_argument("--budget-external", type=int, default=24)
    ap.add_argument("--search-budget", type=int, default=20000)
    ap.add_argument("--ref-budget", type=int, default=30000)
    ap.add_argument("--ref-pool", type=int, default=256)
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    ap.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "mapping_regimes")
    ap.add_argument("--before", type=Path, default=None,
                    help="a results folder of an earlier run: also compare its runs with this one's (before_after.md)")
    ap.add_argument("--from-runs", action="store_true",
                    help="do not run: summarise the runs.json and config.json already in --out")
    ap.add_argument("--exclude", nargs="*", default=[], metavar="REGIME:PROBLEM",
                    help="leave these runs out of the summary (they stay in runs.json), e.g. runs whose "
                         "measurer measured other mappings than the search chose")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    known = {L["name"] for L in DEFAULT_LAYERS}
    bad = [n for n in a.layers if n not in known]
    if bad:
        print(f"mapping_regimes: error: unknown layer(s) {', '.join(bad)}", file=sys.stderr)
        return 2
    if min(a.budget_builtin, a.budget_external, a.search_budget) < 1:
        print("mapping_regimes: error: budgets must be >= 1", file=sys.stderr)
        return 2
    if a.from_runs and not (a.out / "runs.json").is_file():
        print(f"mapping_regimes: error: no runs.json in {a.out} to summarise", file=sys.stderr)
        return 2
    if a.before and not (a.before / "runs.json").is_file():
        print(f"mapping_regimes: error: no runs.json in {a.before} (--before)", file=sys.stderr)
        return 2
    if a.from_runs:      # summarise a finished run again (e.g. with --before)
        config = json.loads((a.out / "config.json").read_text())
        runs, best = json.loads((a.out / "runs.json").read_text())["runs"], dict(config["best"])
    else:
        runs, best, config = run_all(a)
    dropped = [r for r in runs if f"{r['regime']}:{r['problem']}" in a.exclude]
    runs = [with_summary_keys(r) for r in runs if r not in dropped]
    before = [with_summary_keys(r) for r in json.loads((a.before / "runs.json").read_text())["runs"]] if a.before else []
    for r in [r for r in before if r["problem"] in best]:
        best[r["problem"]] = min(best[r["problem"]], min(r["trace"]))
    rows = summarize(runs, best)
    config["best"], config["before"] = best, str(a.before) if a.before else None
    config["excluded_from_summary"] = a.exclude
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    (a.out / "runs.json").write_text(json.dumps({"runs": runs + dropped, "summary": rows}) + "\n")
    md = table(rows) + "\n\nMeasurements to 1 % per problem (median over the seeds that got there; runs that got there):\n\n" + per_problem(runs, best)
    (a.out / "table.md").write_text(md + "\n")
    if a.before:
        ba = before_after([r for r in before if r["problem"] in best], runs, best)
        (a.out / "before_after.md").write_text(f"before: {a.before}\n\n{ba}\n")
        md += "\n\nBefore / after:\n\n" + ba
    if a.json:
        print(json.dumps({"config": config, "summary": rows}, indent=1))
    else:
        print(md)
    ext = [r for r in rows if r["regime"] == "external"]
    if ext and not all(r["ms_per_measurement"] >= 50 for r in ext):
        print("mapping_regimes: the external measurer took < 50 ms per call", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
