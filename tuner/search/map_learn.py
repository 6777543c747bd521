"""The learned model for mappings, where measuring is the expensive part: an external measurer
(``tuner.search.map_measure``) re-measures candidates the analytical search found, in rounds, and
between rounds ``tuner.search.policy`` decides whether an XGBoost model (``tuner.search.cost_model``,
with the analytical log metric as its prior) is trained on what was measured and ranks the
candidates not yet measured.

Features of a mapping (``mapping_features``): the log of every level's and data space's reads,
fills and updates (totals over the utilized instances) from ``sim.cost.engines.batch``; the log words
of every kept tile and, per level, whether it holds two of its tiles (double-buffers): what a
tile-level walk sees and the closed form averages away (the pipeline fill, single buffering);
without them the model cannot tell apart mappings the walk ranks differently and trained for
nothing (experiments/bench/mapping_regimes.py); and the analytical log cycles, energy and compute
cycles. The target is the log of the measured metric
(``delay``: cycles, ``energy``: energy, ``edp``: their product); the prior is the analytical log
metric, so an untrained model ranks exactly as the analytical model does.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from sim.hw.hierarchy import Hierarchy
from sim.cost.engines.batch import MappingArrays, evaluate_batch
from sim.workload.nest import Nest

from .cost_model import CostModel, CostModelConfig, load_xgboost
from .mapsearch import Costs, metric_keys
from .policy import Evidence, ModelPolicy, PairCount, count_pairs, decide, pick_regret


class MappingMeasurer(Protocol):
    def measure(self, mapping_yaml: str) -> tuple[float, float]: ...


def tile_words(nest: Nest, a: MappingArrays) -> np.ndarray:
    """[n, levels, data spaces] words of each data space's tile at each level (the box one
    instance of the level covers: its own and every inner level's factors), kept or not."""
    span = np.cumprod((a.temporal * a.spatial_x * a.spatial_y)[:, ::-1], axis=1)[:, ::-1]
    col = {d: j for j, d in enumerate(nest.dim_names)}
    out = np.ones(span.shape[:2] + (len(nest.data_spaces),), dtype=float)
    for s, ds in enumerate(nest.data_spaces):
        for rank in ds.projection:
            out[:, :, s] *= 1 + sum(c * (span[:, :, col[d]] - 1) for d, c in rank)
    return out


def mapping_features(hier: Hierarchy, nest: Nest, a: MappingArrays) -> np.ndarray:
    """[n, 4 x levels x data spaces + levels + 3] float32 features (see the module docstring)."""
    ev = evaluate_batch(hier, nest, a)
    u = ev.utilized[:, :, None].astype(float)
    counts = np.concatenate([ev.reads * u, ev.fills * u, ev.updates * u], axis=2).reshape(len(a), -1)
    # what the closed form averages away and a measurer sees: the size of every kept tile (a
    # pipeline fills it before compute starts) and whether a level holds two of its tiles (else
    # it cannot double-buffer, and its transfers stop compute)
    kept = tile_words(nest, a) * a.keep
    cap = np.array([np.inf if lv.capacity_words is None else lv.capacity_words for lv in hier.levels])
    double = (2 * kept.sum(axis=2) <= cap[None, :]).astype(float)
    return np.column_stack([np.log1p(counts), np.log1p(kept.reshape(len(a), -1)), double, np.log(ev.cycles),
                            np.log(ev.energy_pj), np.log(ev.compute_cycles)]).astype(np.float32)


def log_metric(metric: str, cycles, energy) -> np.ndarray:
    return np.log(metric_keys(metric, Costs(np.asarray(cycles, float), np.asarray(energy, float)))[0])


@dataclass(frozen=True)
class GuidedResult:
    index: int                  # the best measured candidate
    cycles: float
    energy_pj: float
    measured: tuple[int, ...]   # candidates measured, in order
    measure_s: float
    train_s: float
    fits: int
    rounds_ranked_by_model: int
    last_decision: str


def measure_guided(measurer: MappingMeasurer, yamls: Sequence[str], X: np.ndarray, prior: np.ndarray, metric: str,
                   total: int, per_round: int, policy: ModelPolicy = ModelPolicy()) -> GuidedResult:
    """Measure ``total`` of the candidates (``yamls``, features ``X``, analytical log metric
    ``prior``) ``per_round`` at a time, each round the best ranked not yet measured: by the prior,
    or by the model once the policy has it trained and ranking. ``yamls`` are what ``measurer``
    takes: Timeloop mapping files' text for the CLI's measurers (any value for another measurer,
    e.g. ``sim.mapping.mapping.Mapping`` values in experiments/bench/mapping_regimes.py)."""
    n = len(yamls)
    total = min(total, n)
    prior = np.asarray(prior, dtype=float)
    model = CostModel(CostModelConfig(min_rows=4), X=np.zeros((0, X.shape[1]), np.float32))
    measured: list[int] = []
    cyc: list[float] = []
    en: list[float] = []
    logm: list[float] = []
    oos = ([], [], [])          # model-ranked rows: log measured, model score, prior
    pairs = {"model": PairCount(), "prior_on_model_rows": PairCount()}
    measure_s = train_s = 0.0
    last_fit_s, rows_at_fit, fits, by_model = None, 0, 0, 0
    using, reason = False, "no decision yet"
    score = prior.copy()
    while len(measured) < total:
        taken = set(measured)
        batch = [int(i) for i in np.argsort(score, kind="stable") if int(i) not in taken][:min(per_round, total - len(measured))]
        t0 = time.perf_counter()
        got = [measurer.measure(yamls[i]) for i in batch]
        measure_s += time.perf_counter() - t0
        for i, (c, e) in zip(batch, got):
            measured.append(i)
            cyc.append(c)
            en.append(e)
            logm.append(float(log_metric(metric, [c], [e])[0]))
            if using:
                om, oms, op = oos
                old = len(om)
                om.append(logm[-1])
                oms.append(float(score[i]))
                op.append(float(prior[i]))
                pairs["model"] += count_pairs(oms, om, old, policy.tie)
                pairs["prior_on_model_rows"] += count_pairs(op, om, old, policy.tie)
        if len(measured) >= total:
            break
        idx = np.array(measured)
        ev = Evidence(measure_s=measure_s, train_s=train_s, last_fit_s=last_fit_s, rows_at_last_fit=rows_at_fit,
                      rows=len(measured), prior=count_pairs(prior[idx], logm, 0, policy.tie).agreement(),
                      prior_regret=pick_regret(prior[idx], logm), model=pairs["model"].agreement(),
                      prior_on_model_rows=pairs["prior_on_model_rows"].agreement(), trained=model.trained,
                      backend_loaded="xgboost" in sys.modules)
        d = decide(policy, ev)
        reason = d.reason
        if d.train:
            t0 = time.perf_counter()
            load_xgboost()
            t1 = time.perf_counter()
            model = CostModel(model.config, X=np.zeros((0, X.shape[1]), np.float32)).fit(
                X[idx], np.asarray(logm), np.zeros(len(idx), np.int64), prior[idx])
            last_fit_s, rows_at_fit = time.perf_counter() - t1, len(idx)
            train_s += time.perf_counter() - t0
            fits += int(model.trained)
        using = d.use_model and model.trained
        by_model += int(using)
        score = model.predict(X, prior) if using else prior.copy()
    keys = metric_keys(metric, Costs(np.array(cyc), np.array(en)))
    best = int(np.lexsort((keys[1], keys[0]))[0])
    return GuidedResult(measured[best], cyc[best], en[best], tuple(measured), measure_s, train_s, fits, by_model,
                        reason)
