"""Schedule spaces, cost model, search, tasks, partition search, tuning records, sweeps and the CLI."""
from .cost_model import CostModel, CostModelConfig, CostModelError
from .measure import (AnalyticalMeasurer, CommandMeasurer, MeasureError, Measurer, TileMeasurer,
                      measurer_from_spec)
from .records import Record, RecordsError, append_record, best_record, load_records
from .search import EvolutionarySearch, MeasuredEvolution, RandomSearch, SearchStrategy, Trial
from .space import ScheduleSpace, SpaceError
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
