"""The learned cost model: XGBoost behind ``fit`` / ``predict``.

The model scores schedules of any task on any hardware from ``tuner.search.features`` vectors. The
analytical simulator's log cycles enter as XGBoost's ``base_margin`` (the prior), so the trees learn
the correction that measurement (the tile-level simulator, or a team's RTL) makes to it; an
untrained model ranks exactly as the analytical simulator does.

Two objectives (see docs/TUNING.md for the comparison that chose the default):

- ``"regression"``: squared error on natural-log measured cycles;
- ``"rank"``: XGBoost's ``rank:pairwise`` with one query group per task (workload x hardware), as
  AutoTVM and Ansor do: only the order within a task matters.

``predict`` returns a cost where lower means faster in both cases (log cycles for regression, minus
the rank score over ``rank_prior_scale`` for rank), so search code does not care which objective is used.

A model holds its training set, so ``fit`` with new rows retrains on everything seen (online, each
round) and a saved model warm-starts a later tuning run on other tasks or hardware. ``fit`` returns
a new model; a model is never changed in place.
"""
from __future__ import annotations

import hashlib
import io
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .features import FEATURE_NAMES, N_FEATURES

OBJECTIVES = ("regression", "rank")
_FORMAT = "accel-tune-cost-model/1"


class CostModelError(ValueError):
    """A model file that cannot be read, or data of the wrong shape."""


@dataclass(frozen=True)
class CostModelConfig:
    objective: str = "regression"
    n_trees: int = 40
    max_depth: int = 6
    learning_rate: float = 0.3
    min_child_weight: float = 1.0
    nthread: int = 1
    seed: int = 0
    min_rows: int = 8          # below this many rows the model stays the analytical prior
    max_rows: int = 20000      # keep the most recent rows (training time stays bounded)
    # The pairwise loss has no scale of its own: its trees grow until pairs separate, drowning a
    # prior of log-cycle differences (~0.01-0.1). Scaling the prior keeps it in charge of the order
    # the trees do not learn (docs/TUNING.md).
    rank_prior_scale: float = 100.0

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise CostModelError(f"cost model objective must be one of {', '.join(OBJECTIVES)}, "
                                 f"got {self.objective!r}")
        for name in ("n_trees", "max_depth", "nthread", "min_rows", "max_rows"):
            if int(getattr(self, name)) < 1:
                raise CostModelError(f"cost model {name} must be >= 1, got {getattr(self, name)!r}")


def group_id(workload_key: str, hw_fingerprint: str) -> int:
    """A stable 62-bit id of one task on one hardware (the rank objective's query group)."""
    h = hashlib.sha256(f"{workload_key}|{hw_fingerprint}".encode()).digest()
    return int.from_bytes(h[:8], "little") >> 2


@dataclass(frozen=True, eq=False)
class CostModel:
    config: CostModelConfig = field(default_factory=CostModelConfig)
    X: np.ndarray = field(default_factory=lambda: np.zeros((0, N_FEATURES), dtype=np.float32))
    log_cycles: np.ndarray = field(default_factory=lambda: np.zeros(0))
    prior: np.ndarray = field(default_factory=lambda: np.zeros(0))
    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    booster_raw: bytes | None = None

    @property
    def n_rows(self) -> int:
        return len(self.log_cycles)

    @property
    def trained(self) -> bool:
        return self.booster_raw is not None

    # ------------------------------------------------------------------ training
    def fit(self, X: np.ndarray, log_cycles: np.ndarray, groups: np.ndarray, prior: np.ndarray) -> "CostModel":
        """A model trained on this model's rows plus the new ones. ``log_cycles``: natural log of
        measured cycles; ``groups``: ``group_id`` per row; ``prior``: analytical log cycles."""
        return self.add_rows(X, log_cycles, groups, prior, train=True)

    def add_rows(self, X: np.ndarray, log_cycles: np.ndarray, groups: np.ndarray, prior: np.ndarray,
                 train: bool = False) -> "CostModel":
        """This model's rows plus the new ones; retrained only with ``train`` (otherwise the booster,
        if any, stays as it was: the rows wait for the next ``fit``, here or in a warm-started run)."""
        # the width is this model's (the schedule features by default; a mapping model has its own)
        w = self.X.shape[1]
        X = np.asarray(X, dtype=np.float32).reshape(-1, w) if len(X) else np.zeros((0, w), np.float32)
        n = len(X)
        for name, a in (("log_cycles", log_cycles), ("groups", groups), ("prior", prior)):
            if len(a) != n:
                raise CostModelError(f"cost model fit: {name} has {len(a)} rows, features have {n}")
        keep = self.config.max_rows
        allX = np.concatenate([self.X, X])[-keep:]
        ally = np.concatenate([self.log_cycles, np.asarray(log_cycles, dtype=float)])[-keep:]
        allp = np.concatenate([self.prior, np.asarray(prior, dtype=float)])[-keep:]
        allg = np.concatenate([self.groups, np.asarray(groups, dtype=np.int64)])[-keep:]
        if not train:
            return CostModel(self.config, allX, ally, allp, allg, self.booster_raw)
        raw = _train(self.config, allX, ally, allg, allp) if len(ally) >= self.config.min_rows else None
        return CostModel(self.config, allX, ally, allp, allg, raw)

    # ------------------------------------------------------------------ prediction
    def predict(self, X: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """Cost per row, lower = faster (the analytical prior itself while untrained)."""
        prior = np.asarray(prior, dtype=float)
        if not self.trained or len(prior) == 0:
            return prior.copy()
        import xgboost as xgb
        b = self._booster()
        sign = -self.config.rank_prior_scale if self.config.objective == "rank" else 1.0
        d = xgb.DMatrix(np.asarray(X, dtype=np.float32), base_margin=sign * prior, nthread=self.config.nthread)
        return b.predict(d, output_margin=True).astype(float) / sign

    def _booster(self):
        # Deserialised once per model (a derived cache, not state: the raw bytes define the model).
        b = self.__dict__.get("_booster_cache")
        if b is None:
            b = _booster(self.booster_raw, self.config)
            object.__setattr__(self, "_booster_cache", b)
        return b

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        """One ``.npz`` file (no pickle): configuration, training rows and the booster."""
        meta = json.dumps({"format": _FORMAT, "config": asdict(self.config), "features": list(FEATURE_NAMES)})
        buf = io.BytesIO()
        np.savez_compressed(buf, meta=np.frombuffer(meta.encode(), dtype=np.uint8), X=self.X,
                            log_cycles=self.log_cycles, prior=self.prior, groups=self.groups,
                            booster=np.frombuffer(self.booster_raw or b"", dtype=np.uint8))
        Path(path).write_bytes(buf.getvalue())

    @classmethod
    def load(cls, path: str | Path, config: CostModelConfig | None = None) -> "CostModel":
        """Load a saved model; ``config`` overrides the saved training settings (the rows and
        booster are kept, and the booster is retrained with the new settings on the next fit)."""
        p = Path(path)
        try:
            with np.load(p, allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                arrays = {k: z[k] for k in ("X", "log_cycles", "prior", "groups", "booster")}
        except FileNotFoundError:
            raise CostModelError(f"cost model file {p} does not exist") from None
        except Exception as e:  # zip, npz and JSON errors, reported as one line
            raise CostModelError(f"cannot read cost model {p}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        if meta.get("format") != _FORMAT:
            raise CostModelError(f"cost model {p} has format {meta.get('format')!r}, expected {_FORMAT!r}")
        if meta.get("features") != list(FEATURE_NAMES):
            raise CostModelError(f"cost model {p} was trained on other features; retrain it")
        saved = CostModelConfig(**meta["config"])
        raw = bytes(arrays["booster"]) or None
        if config is not None and config != saved:
            m = cls(config, arrays["X"], arrays["log_cycles"], arrays["prior"], arrays["groups"], None)
            return m.fit(np.zeros((0, N_FEATURES), np.float32), np.zeros(0), np.zeros(0, np.int64), np.zeros(0))
        return cls(saved, arrays["X"].astype(np.float32), arrays["log_cycles"], arrays["prior"],
                   arrays["groups"].astype(np.int64), raw)


def load_xgboost():
    """Import XGBoost (about half a second, once per process): callers that account time charge it
    to training, the only thing that needs it besides predicting with a trained model."""
    import xgboost
    return xgboost


def _params(cfg: CostModelConfig) -> dict:
    p = {"max_depth": cfg.max_depth, "eta": cfg.learning_rate, "min_child_weight": cfg.min_child_weight,
         "nthread": cfg.nthread, "seed": cfg.seed, "tree_method": "hist", "verbosity": 0}
    if cfg.objective == "rank":
        p.update(objective="rank:pairwise", lambdarank_pair_method="mean", lambdarank_num_pair_per_sample=8)
    else:
        p.update(objective="reg:squarederror")
    return p


def _train(cfg: CostModelConfig, X, y, groups, prior) -> bytes:
    import xgboost as xgb
    if cfg.objective == "rank":
        # XGBoost wants each query group contiguous and small non-decreasing ids (64-bit hashes
        # lose their order in its conversion).
        _, qid = np.unique(groups, return_inverse=True)
        order = np.argsort(qid, kind="stable")
        d = xgb.DMatrix(X[order], label=-y[order], qid=qid[order],
                        base_margin=-cfg.rank_prior_scale * prior[order], nthread=cfg.nthread)
    else:
        d = xgb.DMatrix(X, label=y, base_margin=prior, nthread=cfg.nthread)
    b = xgb.train(_params(cfg), d, num_boost_round=cfg.n_trees)
    return bytes(b.save_raw("ubj"))


def _booster(raw: bytes, cfg: CostModelConfig):
    import xgboost as xgb
    b = xgb.Booster(params={"nthread": cfg.nthread})
    b.load_model(bytearray(raw))
    return b
