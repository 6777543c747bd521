"""Rendering Timeloop front-end (timeloopfe) Jinja2 templates, e.g. the exercises' ``top.yaml.jinja2``.

timeloopfe loads every input file through Accelergy's ``accelergy.utils.yaml.load_yaml``: the file
is rendered with Jinja2 (``StrictUndefined``; the ``jinja_parse_data`` values, ``-j KEY=VALUE`` on
its command line, as template variables), then parsed as YAML. This module does the same, with
the same template functions and the same search rules:

- ``cwd()``: the folder of the file being rendered.
- ``find_path(p)`` / ``find_paths(p)``: ``p`` if absolute, else ``p`` joined to the current file's
  folder, then to each folder added by ``add_to_path``; the first existing path / every glob match
  over all of those folders (de-duplicated, in order). ``path_exists(p)``: ``find_path`` succeeds.
- ``add_to_path(p)``: appends ``find_paths(p)`` to the search folders of this file (and of the
  files it includes after that call); renders as nothing.
- ``include(p, keys="")`` / ``include_all(p, keys="")``: load the one / every file ``find_paths``
  gives (rendered and parsed the same way, with a copy of this file's variables and search
  folders) and put the value in the YAML as ``!include_loaded NAME.keys``; ``keys`` (dotted)
  picks a sub-value: of each file for ``include_all``, which gives the list of them.
  ``include_text(p)`` pastes the rendered text of every match.
- YAML tags ``!include FILE`` (relative to the file's folder) and ``!includedir DIR`` (its
  ``*.yaml``); Jinja2's own ``{% include %}``/``{% import %}`` from the file's folder.

Differences, each refused with one line rather than guessed: ``setenv`` (it would change this
process's environment), ``<<<`` merges and ``!nomerge``. All file access (includes, globs,
``path_exists``, ``{% include %}``) is confined to the top file's folder tree, symbolic links
resolved: a path outside it is refused, never read or probed. Templates run in Jinja2's sandbox;
the rendered text of one file is capped at ``MAX_RENDERED_CHARS``; YAML anchors and merge keys
are allowed (the exercises' component files use them) but an alias may not point at a value
holding aliases and a file may hold at most ``MAX_ALIASES`` of them, so the expansion stays linear
in the file's size. That loader (``bounded_loader``, ``parse_bounded``) reads plain Timeloop files
too (``files.read_merged``).
"""
from __future__ import annotations

import copy
import glob
import os
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from ..hw.configfile import AliasError, DuplicateKey, read_text, tagged_loader
from .errors import TimeloopError

TEMPLATE_SUFFIXES = (".jinja", ".jinja2", ".j2")
MAX_RENDERED_CHARS = 4 << 20    # the exercises' rendered inputs are a few KiB
MAX_ALIASES = 512
MAX_FILES = 1000                # files loaded by one top template, includes counted
_SYNTAX = ("{{", "{%", "{#")
_MERGE_TAG = "tag:yaml.org,2002:merge"


def is_template(path: str | os.PathLike, text: str | None = None) -> bool:
    """True for a ``*.jinja``/``*.jinja2``/``*.j2`` file or YAML text holding Jinja2 syntax."""
    if Path(path).suffix.lower() in TEMPLATE_SUFFIXES:
        return True
    return text is not None and any(s in text for s in _SYNTAX)


def render_file(path: str | os.PathLike, variables: Mapping[str, Any] | None, tags: tuple[str, ...],
                root: str | os.PathLike | None = None) -> Any:
    """The parsed document of ``path`` rendered as timeloopfe renders it; ``root`` (default: the
    file's folder) bounds every file access. Faults raise ``TimeloopError`` with one line."""
    try:
        import jinja2  # noqa: F401
    except ImportError:
        raise TimeloopError(f"{path}: Jinja2 templates need the jinja2 package: "
                            f"pip install 'accel-tune[timeloop]'") from None
    real = os.path.realpath(path)
    top = os.path.realpath(root) if root is not None else os.path.dirname(real)
    ctx = _Context(root=top, tags=tags, top=str(path))
    return ctx.load_yaml(real, dict(variables or {}), [])


class _Outside(TimeloopError):
    """A path outside the template's folder tree: refused even where a missing path is not."""


class _MultiInclude:
    """``include_all``'s value: one entry per matched file (``accelergy.utils.yaml.MultiIncludeWrapper``)."""

    def __init__(self, contents: list):
        self.contents = contents


class _Context:
    def __init__(self, root: str, tags: tuple[str, ...], top: str):
        self.root = root
        self.tags = tags
        self.top = top
        self.loading: list[str] = []
        self.files = 0

    # -- confinement -------------------------------------------------------------------------
    def inside(self, p: str) -> str:
        real = os.path.realpath(p)
        if real != self.root and not real.startswith(self.root.rstrip(os.sep) + os.sep):
            raise _Outside(f"{self.top}: template path {p} is outside the template's folder "
                                f"{self.root}; refused")
        return real

    # -- accelergy.utils.yaml.find_paths / find_path ----------------------------------------
    def candidates(self, p: str, cur: str, dirs: list[str]) -> list[str]:
        if not isinstance(p, str):
            raise TimeloopError(f"{self.top}: a template path must be a string, got {type(p).__name__}")
        prefixes = [""] if os.path.isabs(p) else [os.path.dirname(cur)] + dirs
        return [self.inside(os.path.join(d, p)) for d in prefixes]

    def find_paths(self, p: Any, cur: str, dirs: list[str]) -> list[str]:
        if isinstance(p, (list, tuple)):
            found = [x for q in p for x in self.find_paths(q, cur, dirs)]
        else:
            found = []
            searched = self.candidates(p, cur, dirs)
            for s in searched:
                found.extend(sorted(glob.glob(s)) if glob.has_magic(s) else ([s] if os.path.exists(s) else []))
            if not found:
                raise TimeloopError(f"{self.top}: template: could not find {p} (searched {', '.join(searched)})")
        out: list[str] = []
        for f in found:
            f = self.inside(f)
            if f not in out:
                out.append(f)
        return out

    def find_path(self, p: str, cur: str, dirs: list[str]) -> str:
        searched = self.candidates(p, cur, dirs)
        for s in searched:
            if os.path.exists(s):
                return s
        raise TimeloopError(f"{self.top}: template: could not find {p} (searched {', '.join(searched)})")

    # -- accelergy.utils.yaml.load_file_and_includes ----------------------------------------
    def render(self, path: str, data: dict[str, Any], dirs: list[str]) -> tuple[str, dict, list[str]]:
        import jinja2
        from jinja2.sandbox import SandboxedEnvironment

        if path in self.loading:
            raise TimeloopError(f"{self.top}: template: {path} includes itself")
        self.files += 1
        if self.files > MAX_FILES:
            raise TimeloopError(f"{self.top}: template: more than {MAX_FILES} files loaded")
        data = dict(data)
        dirs = list(dirs)
        counter = 0
        ctx = self

        def include(p, single: bool, indices: str = "") -> str:
            nonlocal counter
            indices = str(indices).lstrip(".")
            name = re.sub(r"\W+", "", os.path.basename(path).rsplit(".", 1)[0] + "_" + str(counter))
            found = [self.load_yaml(f, data, dirs) for f in self.find_paths(p, path, dirs)]
            if single and len(found) > 1:
                raise TimeloopError(f"{self.top}: template: include({p!r}) matches {len(found)} files; "
                                    f"use include_all()")
            data[name] = found[0] if len(found) == 1 else _MultiInclude(found)
            counter += 1
            return f"!include_loaded {name}" + (f".{indices}" if indices else "")

        def include_text(p) -> str:
            return "\n".join(self.render(f, data, dirs)[0] for f in self.find_paths(p, path, dirs))

        def add_to_path(p) -> str:
            dirs.extend(self.find_paths(p, path, dirs))
            return ""

        def path_exists(p) -> bool:
            try:
                self.find_path(p, path, dirs)
                return True
            except _Outside:
                raise
            except TimeloopError:
                return False

        def setenv(key, value):
            raise TimeloopError(f"{self.top}: template: setenv({key!r}, ...) is not supported "
                                f"(it would change the environment of this process)")

        class Loader(jinja2.BaseLoader):
            """Jinja2's FileSystemLoader rules (names under the file's folder, no ``..``) with
            the folder-tree bound checked and read_text's checks before anything is read."""

            def get_source(self, environment, template):
                from jinja2.loaders import split_template_path
                filename = ctx.inside(os.path.join(os.path.dirname(path), *split_template_path(template)))
                if not os.path.isfile(filename):
                    raise jinja2.TemplateNotFound(template)
                return read_text(filename, "Timeloop template", TimeloopError), filename, lambda: True

        env = SandboxedEnvironment(loader=Loader(), undefined=jinja2.StrictUndefined)
        env.globals.update(
            cwd=lambda: os.path.dirname(path), include=lambda p, i="": include(p, True, i),
            include_all=lambda p, i="": include(p, False, i), include_text=include_text,
            find_path=lambda p: self.find_path(p, path, dirs), find_paths=lambda p: self.find_paths(p, path, dirs),
            path_exists=path_exists, setenv=setenv, add_to_path=add_to_path)
        self.loading.append(path)
        try:
            template = env.get_template(os.path.basename(path))
            parts, size = [], 0
            for chunk in template.generate(data):
                size += len(chunk)
                if size > MAX_RENDERED_CHARS:
                    raise TimeloopError(f"{self.top}: template: {path} renders to more than "
                                        f"{MAX_RENDERED_CHARS >> 20} MiB")
                parts.append(chunk)
        except TimeloopError:
            raise
        except jinja2.TemplateSyntaxError as e:
            raise TimeloopError(f"{path}: template syntax error at line {e.lineno}: {e.message}") from None
        except jinja2.TemplateNotFound as e:
            raise TimeloopError(f"{path}: template: {{% include %}} of {e.name}: not found in {os.path.dirname(path)}") from None
        except jinja2.UndefinedError as e:
            hint = ""
            m = re.match(r"'(\w+)' is undefined", str(e))
            if m:
                hint = f" (give it as a variable: --timeloop-var {m.group(1)}=VALUE)"
            raise TimeloopError(f"{path}: template: {e}{hint}") from None
        except jinja2.exceptions.SecurityError as e:
            raise TimeloopError(f"{path}: template: refused by the sandbox: {e}") from None
        except (jinja2.TemplateError, TypeError, ValueError, ArithmeticError, LookupError,
                AttributeError, RecursionError) as e:
            first = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
            raise TimeloopError(f"{path}: template: {type(e).__name__}: {first}") from None
        finally:
            self.loading.pop()
        return "".join(parts), data, dirs

    # -- accelergy.utils.yaml.load_yaml -------------------------------------------------------
    def load_yaml(self, path: str, data: dict[str, Any], dirs: list[str]) -> Any:
        path = self.inside(path)
        read_text(path, "Timeloop file", TimeloopError)   # a directory, device or binary: its own line
        text, data, dirs = self.render(path, data, dirs)
        return parse_bounded(text, path, self.loader(path, data), f"{path} (rendered)")

    def loader(self, path: str, data: dict[str, Any]) -> type:
        ctx = self

        class Loader(bounded_loader(self.tags)):
            pass

        def include_loaded(loader, node):
            return copy.deepcopy(_pick(data, str(loader.construct_scalar(node)), path))

        def include(loader, node):
            p = str(loader.construct_scalar(node)).rstrip(",")
            return ctx.load_yaml(os.path.join(os.path.dirname(path), p), data, [])

        def includedir(loader, node):
            d = str(loader.construct_scalar(node)).rstrip(",")
            pattern = os.path.join(ctx.inside(os.path.join(os.path.dirname(path), d)), "*.yaml")
            return [ctx.load_yaml(f, data, []) for f in glob.glob(pattern)]

        def nomerge(loader, node):
            raise TimeloopError(f"{path}: the !nomerge tag is not supported")

        Loader.add_constructor("!include_loaded", include_loaded)
        Loader.add_constructor("!include", include)
        Loader.add_constructor("!includedir", includedir)
        Loader.add_constructor("!nomerge", nomerge)
        return Loader


def bounded_loader(tags: tuple[str, ...]) -> type:
    """The YAML loader of every Timeloop file, plain or rendered: ``configfile.tagged_loader``
    (Timeloop's node tags, no key written twice) with anchors, aliases and merge keys (``<<: *a``)
    allowed, bounded so that the expansion stays linear in the file's size: at most
    ``MAX_ALIASES`` aliases in a file, and no alias of a value that itself holds aliases (the
    billion-laughs bomb). A fault raises ``AliasError``/``DuplicateKey``; ``parse_bounded``
    turns it into one line."""

    class BoundedLoader(tagged_loader(tags)):
        aliases = 0
        nested: frozenset = frozenset()

        def compose_node(self, parent, index):
            # bounded anchors/aliases instead of the config reader's refusal (see the module doc)
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    raise AliasError(f"more than {MAX_ALIASES} YAML aliases")
                if event.anchor in self.nested:
                    raise AliasError(f"line {event.start_mark.line + 1}: alias *{event.anchor} points "
                                     f"at a value holding aliases")
                return yaml.composer.Composer.compose_node(self, parent, index)
            anchor = getattr(event, "anchor", None)
            before = self.aliases
            node = yaml.composer.Composer.compose_node(self, parent, index)
            if anchor is not None and self.aliases > before:
                self.nested = self.nested | {anchor}
            return node

        def construct_mapping(self, node, deep=False):
            # YAML merge keys (``<<: *write_action`` in the exercises' component files): a key
            # given twice is refused among the written keys only; merged keys may be overridden
            if not any(k.tag == _MERGE_TAG for k, _ in node.value):
                return super().construct_mapping(node, deep=deep)
            seen = set()
            for k, _ in node.value:
                if k.tag != _MERGE_TAG:
                    key = self.construct_object(k, deep=True)
                    if isinstance(key, (str, int, float, bool)) and key in seen:
                        raise DuplicateKey(f"line {k.start_mark.line + 1}: key {key!r} appears twice in one mapping")
                    seen.add(key) if isinstance(key, (str, int, float, bool)) else None
            return yaml.constructor.SafeConstructor.construct_mapping(self, node, deep=deep)

    return BoundedLoader


def parse_bounded(text: str, path: str | os.PathLike, loader: type, label: str | None = None) -> Any:
    """``text``, the content of ``path``, parsed with ``loader`` (a ``bounded_loader``); every
    fault, and the ``<<<`` recursive merge key, raises ``TimeloopError`` with one line naming the
    file (``cannot parse LABEL: ...``, ``label`` defaulting to ``Timeloop file PATH``)."""
    label = label or f"Timeloop file {path}"
    try:
        doc = yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except TimeloopError:
        raise
    except (AliasError, DuplicateKey) as e:
        raise TimeloopError(f"cannot parse {label}: {e}") from None
    except RecursionError:
        raise TimeloopError(f"cannot parse {label}: nested too deeply") from None
    except Exception as e:  # the YAML parser's errors, as one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TimeloopError(f"cannot parse {label}: {first}") from None
    _refuse_recursive_merge(doc, str(path))
    return doc


def _pick(data: dict[str, Any], ref: str, path: str) -> Any:
    """``!include_loaded NAME.k1.k2``: the included value, indexed (each file's, for include_all)."""
    found: Any = data
    for k in ref.split("."):
        try:
            if isinstance(found, _MultiInclude):
                found = _MultiInclude([f[k] for f in found.contents])
            else:
                found = found[k]
        except (KeyError, TypeError, IndexError):
            raise TimeloopError(f"{path}: !include_loaded {ref}: no {k!r} in the included file") from None
    return found.contents if isinstance(found, _MultiInclude) else found


def _refuse_recursive_merge(doc: Any, path: str) -> None:
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if "<<<" in x:
                raise TimeloopError(f"{path}: the '<<<' recursive merge key is not supported")
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
