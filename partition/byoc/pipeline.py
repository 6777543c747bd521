"""The BYOC pipeline: a flat, named list of passes that reads top to bottom.

Every pass has the signature ``pass(graph, target) -> graph`` and mutates the graph it is given;
``partition_for`` clones its input first, so callers' graphs never change. The graph is linted after
every pass and a failure names the pass."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, AbstractSet, Callable, Union

from ..ir import Graph, IRError, clone_graph
from .annotate import annotate_target
from .merge_composite import merge_composite
from .merge_regions import Region, merge_compiler_regions, regions
from .partition_graph import partition_graph

if TYPE_CHECKING:
    from ..targets import Target

Pass = Callable[[Graph, "Target"], Graph]


class PartitionError(IRError):
    """A pass failed or left an invalid graph; the message names the pass."""


def region_passes(keep_on_host: AbstractSet[int] = frozenset()) -> list[tuple[str, Pass]]:
    return [
        ("merge_composite", merge_composite),
        ("annotate_target", annotate_target),
        ("merge_compiler_regions", functools.partial(merge_compiler_regions, keep_on_host=keep_on_host)),
    ]


def partition_passes(keep_on_host: AbstractSet[int] = frozenset()) -> list[tuple[str, Pass]]:
    return region_passes(keep_on_host) + [
        ("partition_graph", partition_graph),
    ]


def run_passes(graph: Graph, target: "Target", passes: list[tuple[str, Pass]]) -> Graph:
    for name, p in passes:
        try:
            graph = p(graph, target)
        except IRError as e:
            raise PartitionError(f"pass {name} failed for target {target.name}: {e}") from e
        try:
            graph.lint()
        except IRError as e:
            raise PartitionError(f"graph is invalid after pass {name}: {e}") from e
    return graph


def _target(target: Union["Target", str]) -> "Target":
    if isinstance(target, str):
        from .. import targets
        return targets.get(target)
    return target


def partition_for(graph: Graph, target: Union["Target", str],
                  keep_on_host: AbstractSet[int] = frozenset()) -> Graph:
    """A partitioned copy of ``graph``: host nodes plus calls to external functions of ``target``
    (a Target or a built-in target name). ``keep_on_host`` holds candidate region ids (see
    ``candidate_regions``) to leave on the host."""
    t = _target(target)
    return run_passes(clone_graph(graph), t, partition_passes(frozenset(keep_on_host)))


def candidate_regions(graph: Graph, target: Union["Target", str]) -> tuple[Region, ...]:
    """The regions ``partition_for`` would offload, with the stable ids ``keep_on_host`` takes."""
    t = _target(target)
    return regions(run_passes(clone_graph(graph), t, region_passes()))
