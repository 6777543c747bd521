"""timeloopfe-style Jinja2 templates in the Timeloop reader (sim/timeloop/template.py): a top
template assembled with include/include_all/add_to_path/path_exists/find_path gives exactly the
evaluation of the same files given split, every template function behaves as Accelergy's
``load_yaml`` defines it, and every refusal (paths outside the template's folder, undefined
variables, a missing jinja2, self-includes, alias bombs) is one line."""
import os
import sys
import textwrap

import pytest

pytest.importorskip("jinja2")

from sim.timeloop import TimeloopError, evaluate  # noqa: E402
from sim.timeloop.files import TAGS  # noqa: E402
from sim.timeloop.template import MAX_ALIASES, render_file  # noqa: E402

from test_timeloop_reader import ARCH, ERT, MAP, PROBLEM  # noqa: E402

TOP = """\
{{add_to_path(cwd())}}
{% set alt_problem = cwd() ~ '/' ~ architecture ~ '/problem.yaml' %}
{% if path_exists(alt_problem) %}
  {% set problem = problem | default(alt_problem) %}
{% endif %}
{% set problem = problem | default('_include/default_problem.yaml') %}
problem: {{include(problem, 'problem')}}
architecture: {{include(cwd() ~ '/' ~ architecture ~ '/arch.yaml', 'architecture')}}
mapping: {{include(find_path('maps/' ~ architecture ~ '.map.yaml'), 'mapping')}}
components:
  version: 0.4
  classes: {{include_all('_components/*.yaml', 'compound_components.classes')}}
"""
COMPONENT = """\
compound_components:
  version: 0.4
  classes:
  - name: {name}
    attributes: {{width: 8}}
    actions:
    - &write
      name: write
      subcomponents: [{{name: s, actions: [{{name: write}}]}}]
    - name: update
      <<: *write
"""


def tree(tmp_path, arch_name="pe4"):
    root = tmp_path / "designs"
    for rel, text in {"top.yaml.jinja2": TOP, f"{arch_name}/arch.yaml": ARCH,
                      "_include/default_problem.yaml": PROBLEM, f"maps/{arch_name}.map.yaml": MAP,
                      "_components/a.yaml": COMPONENT.format(name="ca"),
                      "_components/b.yaml": COMPONENT.format(name="cb")}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    ert = tmp_path / "ert.yaml"
    ert.write_text(textwrap.dedent(ERT))
    return root, ert


def split(tmp_path):
    out = []
    for k, v in {"arch": ARCH, "problem": PROBLEM, "map": MAP, "ert": ERT}.items():
        p = tmp_path / f"split_{k}.yaml"
        p.write_text(textwrap.dedent(v))
        out.append(p)
    return out


def test_top_template_equals_the_split_files(tmp_path):
    root, ert = tree(tmp_path)
    got = evaluate([root / "top.yaml.jinja2", ert], {"architecture": "pe4"}).to_json()
    assert got == evaluate(split(tmp_path)).to_json()
    assert got["cycles"] == 8 * 3 * 16 // 4


def test_include_all_picks_the_keys_of_every_file_and_yaml_merge_keys_work(tmp_path):
    root, _ = tree(tmp_path)
    doc = render_file(root / "top.yaml.jinja2", {"architecture": "pe4"}, TAGS)
    classes = doc["components"]["classes"]
    # one list per matched file, in glob order (accelergy's MultiIncludeWrapper)
    assert [[c["name"] for c in f] for f in classes] == [["ca"], ["cb"]]
    assert classes[0][0]["actions"][1] == {"name": "update", "subcomponents": [{"name": "s", "actions": [{"name": "write"}]}]}
    assert doc["architecture"]["nodes"][1]["!"] == "Component"


def test_alternative_problem_found_by_path_exists_and_a_variable_overrides(tmp_path):
    root, ert = tree(tmp_path)
    (root / "pe4" / "problem.yaml").write_text(textwrap.dedent(PROBLEM).replace("name: conv1d", "name: alt"))
    doc = render_file(root / "top.yaml.jinja2", {"architecture": "pe4"}, TAGS)
    assert doc["problem"]["shape"]["name"] == "alt"
    # an explicit problem variable wins over the alternative (the template's `default`)
    doc = render_file(root / "top.yaml.jinja2", {"architecture": "pe4", "problem": "_include/default_problem.yaml"}, TAGS)
    assert doc["problem"]["shape"]["name"] == "conv1d"


def test_find_path_searches_the_files_folder_before_added_folders(tmp_path):
    root = tmp_path / "t"
    (root / "sub").mkdir(parents=True)
    (root / "x.yaml").write_text("v: top\n")
    (root / "sub" / "x.yaml").write_text("v: sub\n")
    (root / "sub" / "inner.yaml").write_text(
        "{{ add_to_path(cwd() ~ '/..') }}first: '{{ find_path('x.yaml') }}'\n"
        "every: {{ include_all('x.yaml', 'v') }}\nn: {{ find_paths('x.yaml') | length }}\n")
    (root / "top.yaml").write_text("inner: {{ include('sub/inner.yaml') }}\nmine: {{ include('x.yaml', 'v') }}\n"
                                   "exists: {{ path_exists('sub/x.yaml') }} {{ path_exists('y.yaml') }}\n")
    doc = render_file(root / "top.yaml", None, TAGS)
    # the including file's folder first, then add_to_path's; include_all takes every match
    assert doc["inner"] == {"first": str((root / "sub" / "x.yaml").resolve()), "every": ["sub", "top"], "n": 2}
    assert doc["mine"] == "top" and doc["exists"] == "True False"


@pytest.mark.parametrize("body, words", [
    ("problem: {{ include('../outside.yaml') }}", "outside the template's folder"),
    ("problem: {{ include('/etc/hostname') }}", "outside the template's folder"),
    ("problem: {{ path_exists('/etc') }}", "outside the template's folder"),
    ("{{ add_to_path('..') }}", "outside the template's folder"),
    ("problem: {{ include('link/outside.yaml') }}", "outside the template's folder"),
    ("problem: !include ../outside.yaml", "outside the template's folder"),
    ("{% include '../outside.yaml' %}", "outside.yaml"),
    ("{% include 'link/outside.yaml' %}", "outside the template's folder"),
    ("problem: {{ include('d') }}", "not a regular file"),
    ("problem: {{ include('top.yaml.jinja2') }}", "includes itself"),
    ("problem: {{ include('nothere.yaml') }}", "could not find nothere.yaml"),
    ("problem: {{ include_all('*.yaml') }}\nx: {{ include('*.yaml') }}", "use include_all"),
    ("{{ setenv('A', 'B') }}", "setenv"),
    ("problem: {{ architecture }}", "'architecture' is undefined (give it as a variable: --timeloop-var architecture=VALUE)"),
    ("problem: {{ ''.__class__.__mro__ }}", "template"),
    ("problem: {% for x in %}", "template syntax error at line 1"),
    ("a: &a [1, 2]\nb: &b [*a, *a]\nc: [*b, *b]", "points at a value holding aliases"),
    ("a: &a [1]\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]", f"more than {MAX_ALIASES} YAML aliases"),
    ("a: {<<<: {b: 1}}", "'<<<'"),
])
def test_refusals_are_one_line(tmp_path, body, words):
    (tmp_path / "outside.yaml").write_text("problem: {}\n")
    root = tmp_path / "t"
    root.mkdir()
    (root / "a.yaml").write_text("v: 1\n")
    (root / "b.yaml").write_text("v: 2\n")
    os.symlink(tmp_path, root / "link")
    (root / "d").mkdir()
    top = root / "top.yaml.jinja2"
    top.write_text(body + "\n")
    with pytest.raises(TimeloopError) as e:
        evaluate([top])
    assert words in str(e.value) and "\n" not in str(e.value)


def test_placeholders_in_a_split_file_and_variables_without_templates(tmp_path):
    fs = split(tmp_path)
    fs[0].write_text(textwrap.dedent(ARCH).replace("depth: 64", "depth: {{ rf_depth }}"))
    assert evaluate(fs, {"rf_depth": "64"}).to_json() == evaluate(split(tmp_path)).to_json()
    with pytest.raises(TimeloopError, match="none of the files is a Jinja2 template"):
        evaluate(split(tmp_path), {"rf_depth": "64"})


def test_missing_jinja2_names_the_extra(tmp_path, monkeypatch):
    root, ert = tree(tmp_path)
    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(TimeloopError, match=r"pip install 'accel-tune\[timeloop\]'"):
        evaluate([root / "top.yaml.jinja2", ert], {"architecture": "pe4"})


def test_mutated_templates_evaluate_or_give_one_line(tmp_path):
    """200 random edits of the top template (characters deleted, duplicated or replaced by
    template/YAML punctuation): each evaluates or raises TimeloopError with one line."""
    import random
    rng = random.Random(12)
    root, ert = tree(tmp_path)
    top = root / "top.yaml.jinja2"
    outcomes = {"ok": 0, "error": 0}
    for _ in range(200):
        text = list(TOP)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(text))
            op = rng.randrange(3)
            if op == 0:
                del text[i]
            elif op == 1:
                text.insert(i, text[i])
            else:
                text[i] = rng.choice("{}%#()'\"|~.:*&!-[] \n")
        top.write_text("".join(text))
        try:
            evaluate([top, ert], {"architecture": "pe4"})
            outcomes["ok"] += 1
        except TimeloopError as e:
            assert "\n" not in str(e), str(e)
            outcomes["error"] += 1
    assert outcomes["error"] > 0 and outcomes["ok"] > 0
