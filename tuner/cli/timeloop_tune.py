"""``accel-tune tune --timeloop FILE... [--metric edp|energy|delay] [--json]``: search the best
mapping of a Timeloop architecture + problem (+ constraints, mapper section, ERT/ART) and print
it, also as a Timeloop mapping file (``-o``) that ``simulate --timeloop`` and timeloop-model
accept. The metric defaults to the mapper section's ``optimization_metrics``.

``--json`` prints one object: cycles, energy_pj, edp, mapping_yaml, evaluations, seconds (issue
13's contract), plus the metric and the search's settings.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tuner.cli import CLIError, print_json
from tuner.cli.progress import progress_enabled


@dataclass(frozen=True)
class TimeloopProblem:
    hier: Any
    nest: Any
    constraints: tuple
    metric: str            # the mapper section's
    given: Any             # a mapping in the files (seeds the search), or None


def load_problem(paths) -> TimeloopProblem:
    """The hierarchy, nest, constraints and mapper metric of Timeloop files (no mapping needed)."""
    from sim.mapping.mapping import MappingError
    from sim.timeloop import TimeloopError
    from sim.timeloop.arch import hierarchy
    from sim.timeloop.files import read_merged
    from sim.timeloop.mapping import read_mapping
    from sim.timeloop.problem import read_problem
    from sim.timeloop.constraints import mapper_metric, read_constraints

    merged = read_merged(paths)
    if "problem" not in merged:
        raise TimeloopError("no 'problem' in the given files")
    hier = hierarchy(merged)
    nest = read_problem(merged["problem"])
    cons = read_constraints(merged, nest.dim_names, nest.bounds, [d.name for d in nest.data_spaces])
    given = None
    if merged.get("mapping"):
        try:
            given = read_mapping(merged["mapping"], hier, nest)
            given.check(hier, nest)
        except (TimeloopError, MappingError):
            given = None   # a partial or illegal mapping only seeds the search: the search does without
    return TimeloopProblem(hier, nest, cons, mapper_metric(merged), given)


DEFAULT_BUDGET = 30000
DEFAULT_MEASURE_TOP = 8


def run_timeloop_tune(args) -> int:
    from sim.cost.movement import evaluate
    from sim.timeloop import mapping_yaml
    from tuner.search.mapper import search_mapping
    from sim.mapping.mapspace_sim import to_mapping

    if args.measure and args.measure_command:
        raise CLIError("tune: give one measurer, --measure tile or --measure-command")
    if args.measure_top is not None and not (args.measure_command or args.measure):
        raise CLIError("--measure-top applies with --measure or --measure-command")
    budget = DEFAULT_BUDGET if args.budget is None else args.budget
    top = DEFAULT_MEASURE_TOP if args.measure_top is None else args.measure_top
    if budget < 1:
        raise CLIError(f"--budget must be >= 1, got {budget}")
    if args.time_limit is not None and not args.time_limit > 0:
        raise CLIError(f"--time-limit must be > 0 seconds, got {args.time_limit}")
    measurer = None
    if args.measure_command or args.measure:
        if top < 1:
            raise CLIError(f"--measure-top must be >= 1, got {top}")
    if args.measure_command:
        from tuner.search.map_measure import MapCommandMeasurer
        measurer = MapCommandMeasurer(args.measure_command)
    out = None
    if args.output:
        from tuner.cli.common import check_writable
        check_writable(args.output, "the mapping")
        out = args.output
    t0 = time.perf_counter()
    prob = load_problem(args.timeloop)
    if args.measure == "tile":
        from tuner.search.map_measure import WalkMeasurer
        measurer = WalkMeasurer(prob.hier, prob.nest)
    t_read = time.perf_counter()
    metric = args.metric or prob.metric
    bar = _bar(args, budget)
    try:
        space, res = search_mapping(prob.hier, prob.nest, metric, budget=budget, constraints=prob.constraints,
                                    seed=args.seed, time_limit_s=args.time_limit, start=prob.given,
                                    progress=bar.update if bar else None,
                                    keep_top=4 * top if measurer else 0, spatial_one_axis=True)
    finally:
        if bar:
            bar.close()
    t_search = time.perf_counter()
    mapping = to_mapping(space, res.genes)
    measured = None
    t_pool = t_guided = t_search
    if measurer is not None:
        # the search's best 4K mappings are the pool; K of them are measured in rounds, ranked by
        # the analytical model or, when the --learned-model policy says so, by XGBoost
        from tuner.search.map_learn import log_metric, mapping_features, measure_guided
        from tuner.search.mapper import movement_evaluator
        from tuner.search.policy import ModelPolicy
        cands = [to_mapping(space, row) for row in res.top]
        arrays = space.arrays(res.top)
        pc = movement_evaluator(prob.hier, prob.nest, space)(arrays)
        yamls = [mapping_yaml(prob.hier, prob.nest, m) for m in cands]
        feats, prior = mapping_features(prob.hier, prob.nest, arrays), log_metric(metric, pc.cycles, pc.energy_pj)
        t_pool = time.perf_counter()
        measured = measure_guided(measurer, yamls, feats, prior, metric, top, max(1, -(-top // 4)),
                                  ModelPolicy(use=args.learned_model))
        t_guided = time.perf_counter()
        mapping = cands[measured.index]
    ev = evaluate(prob.hier, prob.nest, mapping)          # checked, and the counts for the table
    text = mapping_yaml(prob.hier, prob.nest, mapping)
    seconds = time.perf_counter() - t0
    if out:
        with open(out, "w") as f:
            f.write(text)
    cycles, energy = (measured.cycles, measured.energy_pj) if measured else (ev.cycles, ev.energy_pj)
    result = {"cycles": int(round(cycles)), "energy_pj": float(energy), "edp": float(cycles * energy),
              "mapping_yaml": text, "evaluations": int(res.evaluations), "seconds": seconds}
    timing = _timing(t0, t_read, t_search, t_pool, t_guided, seconds, res.evaluations, measured)
    if args.json:
        extra = {"measured": len(measured.measured), "measure_seconds": measured.measure_s,
                 "learned_model": {"policy": args.learned_model, "fits": measured.fits, "train_seconds": measured.train_s,
                                   "rounds_ranked_by_model": measured.rounds_ranked_by_model,
                                   "last_decision": measured.last_decision},
                 "model_cycles": int(ev.cycles), "model_energy_pj": float(ev.energy_pj)} if measured else {}
        print_json({**result, "metric": metric, "budget": budget, "seed": args.seed, "timing": timing,
                    "utilized_macs": int(ev.utilized_macs), **extra, **({"mapping_file": out} if out else {})})
        return 0
    if measured:
        by = "the tile-level walk" if args.measure == "tile" else "the command"
        print(f"measured by {by}: {len(measured.measured)} of the best predicted mappings in "
              f"{measured.measure_s:.2f} s ({measured.fits} XGBoost fits, {measured.train_s:.2f} s: "
              f"{measured.last_decision}); "
              f"best measured: {cycles:,.0f} cycles, {energy:,.2f} pJ (the model: {ev.cycles:,} cycles, "
              f"{ev.energy_pj:,.2f} pJ)")
    macs = prob.hier.arithmetic.instances
    print(f"best mapping for {metric} ({res.evaluations:,} mappings evaluated in {seconds:.2f} s): "
          f"{ev.cycles:,} cycles ({ev.utilized_macs} of {macs} MACs), energy {ev.energy_pj:,.2f} pJ "
          f"({ev.energy_pj / max(1, ev.computes):.3f} pJ/compute), EDP {ev.cycles * ev.energy_pj:.4g} pJ*cycles")
    print(_loop_nest(prob.hier, prob.nest, mapping))
    print(_timing_line(timing))
    if out:
        print(f"mapping written to {out} (accel-tune simulate --timeloop <arch/problem/ERT files> {out})")
    else:
        print("Timeloop mapping:")
        print(text.rstrip())
    return 0


def _timing(t0, t_read, t_search, t_pool, t_guided, total, evaluations, measured) -> dict:
    """Where the run's wall time went (issue 13: the learned model must pay for its time): reading
    the files, the analytical search (generating and evaluating mappings with the closed form),
    and with a measurer: the pool's features and prior, the measurer, XGBoost training (its import
    included), the model's ranking and the policy (``rank_s``); ``other_s``: the final check and
    output."""
    measure_s = measured.measure_s if measured else 0.0
    train_s = measured.train_s if measured else 0.0
    parts = {"read_s": t_read - t0, "search_s": t_search - t_read, "pool_s": t_pool - t_search,
             "measure_s": measure_s, "train_s": train_s,
             "rank_s": max(0.0, (t_guided - t_pool) - measure_s - train_s)}
    return {"total_s": total, **parts, "other_s": max(0.0, total - sum(parts.values())),
            "evaluations": int(evaluations), "measurements": len(measured.measured) if measured else 0,
            "fits": measured.fits if measured else 0}


def _timing_line(t: dict) -> str:
    line = f"time: {t['total_s']:.2f} s (read {t['read_s']:.2f} s, search {t['search_s']:.2f} s"
    if t["measurements"]:
        line += (f", measure {t['measure_s']:.2f} s ({t['measurements']}), train {t['train_s']:.2f} s "
                 f"({t['fits']} fit{'' if t['fits'] == 1 else 's'}), pool features {t['pool_s']:.2f} s, "
                 f"ranking {t['rank_s']:.2f} s")
    return line + f", other {t['other_s']:.2f} s)"


def _loop_nest(hier, nest, mapping) -> str:
    """The mapping as a loop nest, outermost first, one level per block (as Timeloop's map.txt)."""
    lines = []
    dims = nest.dim_names
    for i, (lv, lm) in enumerate(zip(hier.levels, mapping.levels)):
        kept = [d.name for d in nest.data_spaces if mapping.keeps(hier, i, d.name)]
        lines.append(f"  {lv.name} [{', '.join(kept) if kept else 'keeps nothing'}]")
        ind = "  " * (i + 2)
        for d in lm.loop_order(dims):
            lines.append(f"{ind}for {d} in [0:{lm.t(d)})")
        for d, f in lm.spatial_x:
            if f > 1:
                lines.append(f"{ind}for {d} in [0:{f}) (spatial X)")
        for d, f in lm.spatial_y:
            if f > 1:
                lines.append(f"{ind}for {d} in [0:{f}) (spatial Y)")
    return "\n".join(lines)


class _Bar:
    def __init__(self, total: int):
        from tqdm import tqdm
        import sys
        self.bar = tqdm(total=total, desc="mapping search", unit="map", file=sys.stderr, leave=False,
                        dynamic_ncols=True)

    def update(self, n: int, best: float | None) -> None:
        self.bar.update(max(0, min(n, self.bar.total) - self.bar.n))
        if best is not None:
            self.bar.set_postfix_str(f"best {best:.4g}", refresh=False)

    def close(self) -> None:
        self.bar.close()


def _bar(args, total: int):
    return _Bar(total) if progress_enabled(args) else None
