"""The BYOC partition flow, one module per pass (TVM Relax's FuseOpsByPattern,
MergeCompositeFunctions and RunCodegen split into small steps):

merge_composite -> annotate_target -> merge_compiler_regions -> partition_graph,

run in that order by ``partition_for``. Op-support predicates live in ``support``."""
from .annotate import annotate_target
from .merge_composite import merge_composite
from .merge_regions import Region, RegionError, form_regions, merge_compiler_regions, regions
from .partition_graph import partition_graph
from .pipeline import PartitionError, candidate_regions, partition_for, partition_passes, run_passes
from .summary import FunctionSummary, PartitionSummary, summarize

__all__ = ["annotate_target", "merge_composite", "merge_compiler_regions", "form_regions", "regions",
           "Region", "RegionError", "partition_graph", "PartitionError", "candidate_regions",
           "partition_for", "partition_passes", "run_passes", "FunctionSummary", "PartitionSummary",
           "summarize"]
