"""Timeloop interoperability at the edge: Timeloop v0.4 YAML (+ Accelergy ERT/ART) -> the three
values of the multi-level model (``Hierarchy``, ``Nest``, ``Mapping``) -> ``sim.cost.movement``.

``evaluate(paths)`` reads the files (merged by top-level key as Timeloop merges them: the user's
split arch/problem/map files, a timeloopfe Jinja2 top template such as the exercises'
``top.yaml.jinja2`` rendered with ``variables``, or the front end's ``parsed-processed-input.yaml``,
plus the ERT and ART files), and returns a ``sim.cost.movement.Evaluation``; ``load(paths)`` returns the three values;
``mapping_yaml`` writes a mapping back as a Timeloop mapping file. A construct this reader does
not model (sparse densities or optimizations, shared bandwidth, parallel subtrees, template paths outside the template's folder, unknown directive
types or top-level keys) raises ``TimeloopError`` with one line naming it, never a number.
Constraints (``constraints``, ``architecture_constraints``, ``mapspace_constraints``) steer
Timeloop's mapper, not its model: they are read with the files and not applied.
"""
from __future__ import annotations

import os
from collections.abc import Mapping as MappingABC
from typing import Any, Iterable

from ..hw.hierarchy import Hierarchy
from ..mapping.mapping import Mapping, MappingError
from ..cost.movement import Evaluation, evaluate as evaluate_mapping
from ..workload.nest import Nest
from .arch import hierarchy
from .errors import TimeloopError
from .files import read_merged
from .mapping import mapping_directives, mapping_yaml, read_mapping
from .problem import read_problem

__all__ = ["TimeloopError", "evaluate", "load", "mapping_yaml", "mapping_directives"]


def load(paths: Iterable[str | os.PathLike],
         variables: MappingABC[str, Any] | None = None) -> tuple[Hierarchy, Nest, Mapping]:
    merged = read_merged(paths, variables)
    if "problem" not in merged:
        raise TimeloopError("no 'problem' in the given files")
    so = merged.get("sparse_optimizations")
    if so and (not isinstance(so, dict) or so.get("targets")):
        raise TimeloopError("sparse_optimizations (gating, skipping, compressed formats) are not supported: "
                            "the model is dense")
    if not merged.get("mapping"):
        raise TimeloopError("no 'mapping' in the given files (a mapper run's mapping is its *.map.yaml)")
    hier = _guard("architecture", hierarchy, merged)
    nest = _guard("problem", read_problem, merged["problem"])
    mapping = _guard("mapping", read_mapping, merged["mapping"], hier, nest)
    try:
        mapping.check(hier, nest)
    except MappingError as e:
        raise TimeloopError(str(e)) from None
    return hier, nest, mapping


def _guard(section: str, fn, *args):
    """Run one reader; a value of an unexpected type deep in a hand-edited file (a list where a
    number belongs, a mapping where a name belongs) is bad input too: one line naming the section."""
    try:
        return fn(*args)
    except TimeloopError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, ZeroDivisionError, OverflowError) as e:
        first = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
        raise TimeloopError(f"{section}: malformed input ({type(e).__name__}: {first})") from None


def evaluate(paths: Iterable[str | os.PathLike],
             variables: MappingABC[str, Any] | None = None) -> Evaluation:
    """Timeloop's statistics for the given files (see ``Evaluation.to_json``); ``variables`` are
    the Jinja2 templates' values (timeloopfe's ``jinja_parse_data``)."""
    hier, nest, mapping = load(paths, variables)
    return evaluate_mapping(hier, nest, mapping, check=False)
