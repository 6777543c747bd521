"""Reading a configuration file (a hardware config, a sweep spec) as untrusted input.

A config file is small text. ``read_config`` refuses, each time with one line naming the file,
anything else: a path that is not a regular file (a directory, ``/dev/zero``, a FIFO that would
block), more than ``MAX_CONFIG_BYTES``, bytes that are not UTF-8 or hold NUL (a binary file), a
parse error, nesting deeper than the parser's recursion allows, a key given twice in one table
(the second would silently win), and YAML anchors and aliases (an alias bomb expands a few
hundred bytes into billions of nodes; no config needs them).
"""
from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import yaml

from partition.serialize import unique_keys

MAX_CONFIG_BYTES = 1 << 20   # 1 MiB: the largest shipped config is a few KiB
SUFFIXES = (".toml", ".yaml", ".yml", ".json")


def read_config(path: str | os.PathLike, what: str, error: type[ValueError],
                yaml_tags: tuple[str, ...] = ()) -> Any:
    """The parsed document of a TOML, YAML or JSON file; ``what`` names the file's role in
    messages ("hardware config", "sweep spec"); faults raise ``error`` with one line.
    ``yaml_tags`` (e.g. Timeloop's ``!Component``) are accepted on YAML mappings and become a
    ``"!"`` key holding the tag name; any other tag stays refused as SafeLoader refuses it."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in SUFFIXES:
        raise error(f"{what} {p} must end in .toml, .yaml, .yml or .json")
    text = read_text(p, what, error)
    try:
        return _parse(text, suffix, yaml_tags)
    except (AliasError, DuplicateKey) as e:
        raise error(f"cannot parse {what} {p}: {e}") from None
    except RecursionError:
        raise error(f"cannot parse {what} {p}: nested too deeply") from None
    except Exception as e:  # parse errors of three libraries, reported as one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise error(f"cannot parse {what} {p}: {first}") from None


def read_text(path: str | os.PathLike, what: str, error: type[ValueError]) -> str:
    """The text of a small UTF-8 file, with read_config's checks (regular file, size cap, no NUL,
    UTF-8); faults raise ``error`` with one line."""
    p = Path(path)
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} {p} is not a regular file (a directory, device or pipe)")
        with open(p, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise error(f"cannot read {what} {p}: {e.strerror or e}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise error(f"{what} {p} is larger than {MAX_CONFIG_BYTES >> 20} MiB; config files are small text")
    if b"\x00" in data:
        raise error(f"{what} {p} is not a text file (it holds NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{what} {p} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                    f"is it a binary file?") from None
    return text


def _parse(text: str, suffix: str, yaml_tags: tuple[str, ...] = ()) -> Any:
    if suffix == ".toml":
        return tomllib.loads(text)
    if suffix == ".json":
        return json.loads(text, object_pairs_hook=unique_keys)
    loader = tagged_loader(tuple(yaml_tags)) if yaml_tags else _StrictSafeLoader
    return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass


def tagged_loader(tags: tuple[str, ...]) -> type:
    """A _StrictSafeLoader that also reads ``!Tag {mapping}`` for the given tag names."""
    class _Tagged(_StrictSafeLoader):
        pass

    def construct(loader, node):
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(None, None, f"tag {node.tag} must be on a mapping",
                                                    node.start_mark)
        out = loader.construct_mapping(node, deep=True)
        out["!"] = node.tag.lstrip("!")
        return out

    for tag in tags:
        _Tagged.add_constructor("!" + tag.lstrip("!"), construct)
    return _Tagged


class AliasError(ValueError):
    pass


class DuplicateKey(ValueError):
    pass


class _StrictSafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses anchors and aliases before composing them, and a key given
    twice in one mapping."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise AliasError(f"line {event.start_mark.line + 1}: YAML anchors and aliases (&name, *name) "
                              f"are not allowed in config files; write the values out")
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                dup = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if dup:
                raise DuplicateKey(f"line {key_node.start_mark.line + 1}: key {key!r} appears twice "
                                    f"in one mapping")
        return super().construct_mapping(node, deep=deep)
