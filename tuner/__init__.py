"""Schedule spaces, cost model, search, tasks, partition search, tuning records, sweeps and the CLI."""
from .search.cost_model import CostModel, CostModelConfig, CostModelError
from .search.measure import (AnalyticalMeasurer, CommandMeasurer, MeasureError, Measurer, TileMeasurer,
                             measurer_from_spec)
from .records import Record, RecordsError, append_record, best_record, load_records
from .search.strategies import EvolutionarySearch, MeasuredEvolution, RandomSearch, SearchStrategy, Trial
from .search.space import ScheduleSpace, SpaceError
from .tasks import Task, TaskError, TaskScheduler, extract_tasks
from .tune_kernels import TaskResult, TuneResult, tune_kernels
from .costing import CostOptions
from .plan import Decision, Plan
from .partition_problem import PartitionSearchError, Problem
from .partition_search import search as partition_search
from .tune import TuneError, tune

__all__ = ["CostModel", "CostModelConfig", "CostModelError",
           "Measurer", "TileMeasurer", "AnalyticalMeasurer", "CommandMeasurer", "MeasureError", "measurer_from_spec",
           "Record", "RecordsError", "append_record", "best_record", "load_records",
           "SearchStrategy", "EvolutionarySearch", "RandomSearch", "MeasuredEvolution", "Trial",
           "ScheduleSpace", "SpaceError", "Task", "TaskError", "TaskScheduler", "extract_tasks",
           "tune_kernels", "TuneResult", "TaskResult",
           "tune", "TuneError", "Plan", "Decision", "CostOptions", "Problem", "PartitionSearchError",
           "partition_search"]

from partition.moved import alias_modules  # noqa: E402

# Module paths before issue 21 (the search of one kernel became tuner.search); one release.
alias_modules({
    "tuner.space": "tuner.search.space",
    "tuner.mapsearch": "tuner.search.mapsearch",
    "tuner.mapper": "tuner.search.mapper",
    "tuner.map_learn": "tuner.search.map_learn",
    "tuner.map_measure": "tuner.search.map_measure",
    "tuner.measure": "tuner.search.measure",
    "tuner.cost_model": "tuner.search.cost_model",
    "tuner.features": "tuner.search.features",
    "tuner.scoring": "tuner.search.scoring",
    "tuner.model_policy": "tuner.search.policy",
    "tuner.learner": "tuner.search.learner",
})
