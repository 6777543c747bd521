"""Reading Timeloop input files and merging them by top-level key, as Timeloop does.

Each file is read as untrusted input by ``sim.configfile.read_config`` (size cap, text only, no
YAML anchors/aliases, no duplicate keys) with Timeloop v0.4's node tags (``!Component``,
``!Container``, ``!Parallel``, ``!Hierarchical``, ``!Nothing``) accepted. Files are merged by
top-level key: a later file's key replaces an earlier one's, except that an empty ``mapping``
(the processed input of a mapper run) never hides a non-empty one. Jinja2 templates are refused
with one line: render them first (Timeloop's front end writes the rendered, processed input as
``parsed-processed-input.yaml``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from ..configfile import read_config
from .errors import TimeloopError

TAGS = ("Component", "Container", "Parallel", "Hierarchical", "Nothing")
KNOWN_KEYS = frozenset({
    "architecture", "problem", "mapping", "constraints", "architecture_constraints", "mapspace_constraints",
    "extra_mapping_constraints", "mapper", "mapspace", "globals", "variables", "components",
    "compound_components", "ERT", "ART", "ERT_summary", "ART_summary", "sparse_optimizations",
    "dumped_by_timeloop_front_end", "model", "version"})


def read_merged(paths: Iterable[str | os.PathLike]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    paths = list(paths)
    if not paths:
        raise TimeloopError("no Timeloop files given")
    for p in paths:
        p = Path(p)
        if p.suffix.lower() in (".jinja", ".jinja2", ".j2"):
            raise TimeloopError(f"{p}: Jinja2 templates are not supported; give the rendered files "
                                f"(e.g. Timeloop's parsed-processed-input.yaml)")
        try:
            doc = read_config(p, "Timeloop file", TimeloopError, yaml_tags=TAGS)
        except TimeloopError:
            if _has_template_syntax(p):
                raise TimeloopError(f"{p}: holds Jinja2 template syntax ({{{{ ... }}}} or {{% ... %}}); render "
                                    f"it first (e.g. give Timeloop's parsed-processed-input.yaml)") from None
            raise
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise TimeloopError(f"{p}: a Timeloop file must be a mapping of top-level keys, got {type(doc).__name__}")
        for k, v in doc.items():
            if k not in KNOWN_KEYS:
                raise TimeloopError(f"{p}: unsupported top-level key {str(k)[:60]!r}")
            if k == "mapping" and not v and merged.get("mapping"):
                continue
            merged[k] = v
    return merged


def _has_template_syntax(p: Path) -> bool:
    """Called only after the file was read once as a regular text file within the size cap."""
    try:
        with open(p, "rb") as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    return b"{{" in text or b"{%" in text
