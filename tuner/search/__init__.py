"""The search of one kernel: schedules on a one-level machine, mappings on a storage hierarchy.

- space: ``space`` (``ScheduleSpace``, the legal schedules of a workload on a config; a mapping
  space is ``sim.mapping.mapspace``'s);
- the loop: ``evolution`` (the one evolutionary loop: ``breed``, the tournament + mutation +
  crossover step, generations, elitist or (mu + lambda) survival), run by ``strategies``
  (ask/tell strategies over a schedule space: random, evolution ranked by a scorer, evolution on
  measurements) and by ``mapsearch`` (evolution over a mapspace with the batched data-movement
  model as fitness, then local descent); ``mapper`` (the best mapping of a nest on a hierarchy
  under a budget);
- the learned model: ``cost_model`` (XGBoost behind fit/predict), ``features``, ``scoring`` (how a
  search ranks candidates), ``learner`` (the model's side of a kernel tuning run) and
  ``map_learn`` (the model for mappings, where measuring is the expensive part);
- policy: ``policy``, when the model trains and when the search ranks with it;
- measure: ``measure`` (what the tuner trusts as a schedule's cost: tile walk, analytical, an
  external command) and ``map_measure`` (the same for mappings).

Before issue 21 ``tuner.search`` was the module now named ``tuner.search.strategies``; its names
are still read from here for one release, with a DeprecationWarning.
"""
from partition.moved import moved_names as _moved_names

__getattr__ = _moved_names(__name__, "tuner.search.strategies")
