"""Timeloop's architecture (v0.4 user tree or the front end's processed form) plus Accelergy's
ERT/ART -> ``sim.hw.hierarchy.Hierarchy``.

Two forms are read:

- **user tree** (``architecture.nodes``): ``!Container`` nodes open a nesting level and pass
  their attributes down; a container with ``spatial: {meshX, meshY}`` multiplies the instances
  of everything below it and becomes a spatial-only level ``inter_<name>_spatial`` (as
  Timeloop's front end inserts it); ``!Parallel`` branches are laid out one after another in the
  listed order (as the front end does); ``!Nothing`` is skipped.
- **processed** (``architecture.subtree[].local``): components named ``name[1..N]`` with N the
  total instances and ``meshX``/``meshY`` attributes; ``dummy_storage`` components are the
  spatial-only levels. A nested ``subtree`` multiplies by its own range (the v0.3 layout).

The last component is the compute unit; every other one is a storage level. Word bits come
from ``datawidth`` (or ``word_bits``), the block size from ``block_size`` or width / word bits,
the capacity from ``depth`` x block (``size`` when given; none = unbounded, as DRAM), divided by
``multiple_buffering``. Energies per action (read, write = fill, update, leak; compute) come from
the ERT, areas per instance from the ART, both matched by component name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..hw.hierarchy import Arithmetic, Hierarchy, HierarchyError, StorageLevel
from .errors import TimeloopError
from .expr import resolve

_RANGE = re.compile(r"^(.*)\[(\d+)\.\.(\d+)\]$")


@dataclass
class Component:
    name: str
    cls: str
    attributes: dict[str, Any]
    instances: int
    mesh_x: int
    mesh_y: int
    dummy: bool = False
    constraints: dict[str, Any] = field(default_factory=dict)


def _split_name(raw: Any) -> tuple[str, int]:
    if not isinstance(raw, str) or not raw:
        raise TimeloopError(f"architecture: a component needs a name, got {str(raw)[:40]!r}")
    m = _RANGE.match(raw)
    if not m:
        return raw, 1
    lo, hi = int(m.group(2)), int(m.group(3))
    if hi < lo:
        raise TimeloopError(f"architecture: component {raw}: empty instance range")
    return m.group(1), hi - lo + 1


def _num(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TimeloopError(f"architecture: {where} must be a number, got {str(v)[:40]!r} "
                            f"(expressions are not evaluated: give the processed input)")
    return v


def _mesh(spatial: Any, where: str) -> tuple[int, int]:
    if spatial is None:
        return 1, 1
    if not isinstance(spatial, dict):
        raise TimeloopError(f"architecture: {where}.spatial must be a mapping with meshX/meshY")
    unknown = set(spatial) - {"meshX", "meshY"}
    if unknown:
        raise TimeloopError(f"architecture: {where}.spatial: unsupported key {sorted(unknown)[0]!r}")
    return int(_num(spatial.get("meshX", 1), f"{where} meshX")), int(_num(spatial.get("meshY", 1), f"{where} meshY"))


def _walk_user(nodes: Any, st: dict[str, Any], out: list[Component]) -> None:
    """``st``: attributes passed down (``attrs``), the mesh so far (``mx``, ``my``), and the
    top-level ``variables`` (``vars``) expressions may name."""
    if not isinstance(nodes, list):
        raise TimeloopError("architecture: 'nodes' must be a list")
    for node in nodes:
        if not isinstance(node, dict):
            raise TimeloopError(f"architecture: a node must be a mapping, got {str(node)[:40]!r}")
        tag = node.get("!")
        if tag == "Nothing":
            continue
        if tag in ("Parallel", "Hierarchical"):
            _walk_user(node.get("nodes", []), st, out)
            continue
        name = node.get("name")
        if tag == "Container":
            st["attrs"] = resolve({**st["attrs"], **(node.get("attributes") or {})}, st["vars"])
            mx, my = _mesh(node.get("spatial"), f"container {name}")
            if mx * my > 1:
                out.append(Component(f"inter_{name}_spatial", "dummy_storage", {}, st["mx"] * st["my"],
                                     st["mx"], st["my"], dummy=True))
                st["mx"] *= mx
                st["my"] *= my
            continue
        if tag != "Component" and "class" not in node:
            raise TimeloopError(f"architecture: unsupported node {str(tag or name)[:40]!r} "
                                f"(supported: !Component, !Container, !Parallel, !Hierarchical, !Nothing)")
        mx, my = _mesh(node.get("spatial"), f"component {name}")
        st["mx"] *= mx
        st["my"] *= my
        attrs = resolve({**st["attrs"], **(node.get("attributes") or {})}, st["vars"])
        out.append(Component(str(name), str(node.get("class", "")), attrs, st["mx"] * st["my"], st["mx"], st["my"],
                             constraints=node.get("constraints") or {}))


def _walk_processed(tree: Any, mult: int, out: list[Component], variables: dict[str, Any]) -> None:
    if not isinstance(tree, list) or len(tree) != 1:
        raise TimeloopError("architecture: a subtree must hold exactly one entry (parallel subtrees are not supported)")
    node = tree[0]
    if not isinstance(node, dict):
        raise TimeloopError("architecture: a subtree entry must be a mapping")
    _, n = _split_name(node.get("name", "top"))
    mult *= n
    for comp in node.get("local") or []:
        if not isinstance(comp, dict):
            raise TimeloopError("architecture: a local component must be a mapping")
        name, k = _split_name(comp.get("name"))
        attrs = resolve(dict(comp.get("attributes") or {}), variables)
        inst = k * mult
        mx = attrs.get("meshX")
        my = attrs.get("meshY")
        mx = int(_num(mx, f"{name} meshX")) if mx is not None else None
        my = int(_num(my, f"{name} meshY")) if my is not None else None
        if mx is None and my is None:
            mx, my = inst, 1
        elif mx is None:
            mx = inst // my
        elif my is None:
            my = inst // mx
        cls = str(comp.get("class", ""))
        out.append(Component(name, cls, attrs, inst, mx, my, dummy=cls == "dummy_storage"))
    if node.get("subtree"):
        _walk_processed(node["subtree"], mult, out, variables)


def components(arch: Any, variables: Any = None) -> list[Component]:
    """The architecture's components, outermost first (the compute unit last); attribute
    expressions are evaluated over the top-level ``variables``."""
    if not isinstance(arch, dict):
        raise TimeloopError("architecture must be a mapping")
    if variables is None:
        variables = {}
    if not isinstance(variables, dict):
        raise TimeloopError("variables must be a mapping of names to values")
    variables = resolve({k: v for k, v in variables.items() if isinstance(k, str)}, {})
    out: list[Component] = []
    if "nodes" in arch:
        _walk_user(arch["nodes"], {"attrs": {}, "mx": 1, "my": 1, "vars": variables}, out)
    elif "subtree" in arch:
        _walk_processed(arch["subtree"], 1, out, variables)
    else:
        raise TimeloopError("architecture needs 'nodes' (v0.4 tree) or 'subtree' (processed input)")
    if len(out) < 2:
        raise TimeloopError("architecture needs at least one storage level and a compute unit")
    return out


def _tables(doc: Any, key: str, what: str) -> dict[str, Any]:
    """Accelergy table entries by component name (without the path prefix and instance range)."""
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise TimeloopError(f"{key} must be a mapping")
    out = {}
    tables = doc.get("tables") or doc.get("table_summary") or []
    if not isinstance(tables, list):
        raise TimeloopError(f"{key}: 'tables' must be a list")
    for t in tables:
        if not isinstance(t, dict) or "name" not in t:
            raise TimeloopError(f"{key}: each {what} table needs a name")
        base = _split_name(str(t["name"]))[0].split(".")[-1]
        out[base] = t
    return out


def _action_energy(entry: dict[str, Any] | None, action: str) -> float | None:
    if entry is None:
        return None
    found = [a for a in entry.get("actions") or [] if isinstance(a, dict) and a.get("name") == action]
    if not found:
        return None
    return float(_num(found[0].get("energy"), f"ERT {entry.get('name')} {action}"))


def _area(entry: dict[str, Any] | None) -> float:
    return float(_num(entry.get("area", 0.0), f"ART {entry.get('name')} area")) if entry else 0.0


def hierarchy(merged: dict[str, Any]) -> Hierarchy:
    """The hierarchy of a merged Timeloop document (needs ``architecture`` and ``ERT``)."""
    if "architecture" not in merged:
        raise TimeloopError("no 'architecture' in the given files")
    if "ERT" not in merged:
        raise TimeloopError("no Accelergy ERT in the given files (energy needs it: pass the *.ERT.yaml "
                            "Accelergy wrote next to the processed input)")
    comps = components(merged["architecture"], merged.get("variables"))
    ert = _tables(merged.get("ERT"), "ERT", "ERT")
    art = _tables(merged.get("ART"), "ART", "ART")
    levels = []
    for c in comps[:-1]:
        a = c.attributes
        where = f"component {c.name}"
        if c.dummy:
            levels.append(StorageLevel(c.name, instances=c.instances, mesh_x=c.mesh_x, mesh_y=c.mesh_y,
                                       spatial_only=True))
            continue
        for k in ("shared_bandwidth",):
            if a.get(k) is not None:
                raise TimeloopError(f"architecture: {where}: {k} is not supported (give read_bandwidth/write_bandwidth)")
        if str(a.get("metadata_storage_depth", 0) or 0) not in ("0",):
            raise TimeloopError(f"architecture: {where}: metadata storage (sparse formats) is not supported")
        bits = a.get("datawidth", a.get("word_bits", a.get("word-bits")))
        bits = int(_num(bits, f"{where} datawidth")) if bits is not None else 16
        cluster = int(_num(a.get("cluster_size", 1) or 1, f"{where} cluster_size"))
        if a.get("block_size") is not None:
            block = int(_num(a["block_size"], f"{where} block_size"))
        elif a.get("width") is not None:
            # the width is shared by the instances of a cluster (Timeloop: width / word bits / cluster)
            block = max(1, int(_num(a["width"], f"{where} width")) // bits // cluster)
        else:
            block = 1
        if a.get("size") is not None:
            cap = int(_num(a["size"], f"{where} size"))
        elif a.get("depth") is not None:
            cap = int(_num(a["depth"], f"{where} depth")) * block
        else:
            cap = None
        mb = a.get("multiple_buffering", 1)
        if cap is not None and mb not in (None, 1):
            cap = int(cap / _num(mb, f"{where} multiple_buffering"))
        e = ert.get(c.name)
        if e is None:
            raise TimeloopError(f"ERT has no entry for storage level {c.name}")
        rd, wr, up, leak = (_action_energy(e, x) for x in ("read", "write", "update", "leak"))
        wr = wr if wr is not None else up
        up = up if up is not None else wr
        if rd is None or wr is None:
            raise TimeloopError(f"ERT entry of {c.name} needs read and write (or update) energies")
        rbw, wbw = a.get("read_bandwidth"), a.get("write_bandwidth")
        art_e = art.get(c.name)
        try:
            levels.append(StorageLevel(
                c.name, capacity_words=cap, word_bits=bits, block_size=block,
                cluster_size=cluster,
                instances=c.instances, mesh_x=c.mesh_x, mesh_y=c.mesh_y,
                read_bandwidth=None if rbw is None else float(_num(rbw, f"{where} read_bandwidth")),
                write_bandwidth=None if wbw is None else float(_num(wbw, f"{where} write_bandwidth")),
                read_pj=rd, fill_pj=wr, update_pj=up, leak_pj_per_cycle=leak or 0.0,
                area_um2=_area(art_e)))
        except HierarchyError as err:
            raise TimeloopError(f"architecture: {err}") from None
    mac = comps[-1]
    e = ert.get(mac.name)
    compute = _action_energy(e, "compute")
    if compute is None:
        raise TimeloopError(f"ERT has no 'compute' energy for the compute unit {mac.name} (the last component)")
    art_e = art.get(mac.name)
    try:
        return Hierarchy(tuple(levels), Arithmetic(mac.name, instances=mac.instances, mesh_x=mac.mesh_x,
                                                   mesh_y=mac.mesh_y, mac_pj=compute,
                                                   area_um2=_area(art_e)))
    except HierarchyError as err:
        raise TimeloopError(f"architecture: {err}") from None
