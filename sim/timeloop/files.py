"""Reading Timeloop input files and merging them by top-level key, as Timeloop does.

Each file is read as untrusted input (``sim.hw.configfile.read_text``: size cap, text only) and
parsed with the loader a rendered template's files are parsed with (``template.bounded_loader``):
Timeloop v0.4's node tags (``!Component``, ``!Container``, ``!Parallel``, ``!Hierarchical``,
``!Nothing``), no key written twice, and YAML anchors, aliases and merge keys (``<<: *name``, as in
Timeloop's own component files) within a bound that keeps the expansion linear (at most
``MAX_ALIASES`` aliases, none of a value holding aliases). A JSON or TOML file is read by
``sim.hw.configfile.read_config``. Hardware configs and sweep specs keep that reader's stricter rule
(no anchors at all). Files are merged by
top-level key: a later file's key replaces an earlier one's, except that an empty ``mapping``
(the processed input of a mapper run) never hides a non-empty one. Jinja2 templates (a top
``*.jinja2`` with timeloopfe's include functions, or split files with ``{{ }}`` placeholders)
are rendered first, as timeloopfe renders them (``template``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..hw.configfile import read_config, read_text
from .errors import TimeloopError
from .template import bounded_loader, is_template, parse_bounded, render_file

TAGS = ("Component", "Container", "Parallel", "Hierarchical", "Nothing")
KNOWN_KEYS = frozenset({
    "architecture", "problem", "mapping", "constraints", "architecture_constraints", "mapspace_constraints",
    "extra_mapping_constraints", "mapper", "mapspace", "globals", "variables", "components",
    "compound_components", "ERT", "ART", "ERT_summary", "ART_summary", "sparse_optimizations",
    "dumped_by_timeloop_front_end", "model", "version"})


def read_merged(paths: Iterable[str | os.PathLike],
                variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The files merged by top-level key; a Jinja2 template (``*.jinja2`` or a file holding
    ``{{``/``{%``/``{#``) is rendered first as timeloopfe renders it (``template.render_file``),
    ``variables`` being its ``jinja_parse_data``."""
    merged: dict[str, Any] = {}
    paths = list(paths)
    if not paths:
        raise TimeloopError("no Timeloop files given")
    rendered = False
    for p in paths:
        p = Path(p)
        text = None if is_template(p) else read_text(p, "Timeloop file", TimeloopError)
        if text is None or is_template(p, text):
            doc = render_file(p, variables, TAGS)
            rendered = True
        elif p.suffix.lower() in (".yaml", ".yml"):
            doc = parse_bounded(text, p, bounded_loader(TAGS))
        else:
            doc = read_config(p, "Timeloop file", TimeloopError, yaml_tags=TAGS)
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
    if variables and not rendered:
        raise TimeloopError(f"template variables ({', '.join(map(str, variables))}) given but none of the "
                            f"files is a Jinja2 template")
    return merged
