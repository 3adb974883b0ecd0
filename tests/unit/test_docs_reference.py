"""docs/reference/*.md are what the code generates (`trainyard docs reference --check`), and the generator's parts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Mapping, Union

import pytest
import typer
from typer.testing import CliRunner

from trainyard.cli.main import app
from trainyard.docs_reference import (REFERENCE_DIR, anchor, attribute_docs, cell, cli_reference, default_text,
                                      help_text, param_default, param_type, reference_pages, schema_bounds,
                                      schema_rules, stack_rows, stale_pages, type_name)
from trainyard.field_markers import described_default
from trainyard.openapi import Rule
from trainyard.paths import repo_root
from trainyard.platform.stack_model import StackConfig


def test_the_checked_in_reference_is_what_the_code_generates():
    result = CliRunner().invoke(app, ["docs", "reference", "--check"])
    assert result.exit_code == 0, f"{result.output}run `.venv/bin/trainyard docs reference` and commit docs/reference"


def test_the_check_names_a_stale_page(tmp_path):
    pages = {"cli.md": "a\n", "stack.md": "b\n", "admission.md": "c\n"}
    (tmp_path / "cli.md").write_text("a\n")
    (tmp_path / "stack.md").write_text("old\n")
    assert stale_pages(tmp_path, pages) == ["stack.md", "admission.md"]


def test_the_check_exits_non_zero_and_names_the_file(tmp_path, monkeypatch):
    """Against a copy of the checkout whose stack page is stale."""
    for name in ("pyproject.toml", "tools/versions.toml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / REFERENCE_DIR).mkdir(parents=True)
    for name, text in reference_pages(typer.main.get_command(app)).items():
        (tmp_path / REFERENCE_DIR / name).write_text(text if name != "stack.md" else text + "edited by hand\n")
    monkeypatch.setenv("TRAINYARD_ROOT", str(tmp_path))
    result = CliRunner().invoke(app, ["docs", "reference", "--check"])
    assert result.exit_code == 1
    assert "docs/reference/stack.md is stale" in result.output
    assert "cli.md" not in result.output


def test_every_stack_key_has_a_description():
    missing = [key for key, _, _, text in stack_rows(StackConfig, "trainyard:") if not text]
    assert missing == [], "describe these keys in the field's docstring (platform/stack_model.py, queues/)"


def test_the_cli_page_lists_every_command():
    text = cli_reference(typer.main.get_command(app))
    for path in (["catalog", "new"], ["cluster", "up"], ["docs", "reference"], ["usage"]):
        assert f"## trainyard {' '.join(path)}\n" in text
    assert "| `--from` | text | required | Release whose sources to copy. |" in text


@pytest.mark.parametrize("text,expected", [
    ("a | b", "a \\| b"),
    ("two\n  lines", "two lines"),
    (3, "3"),
])
def test_cell(text, expected):
    assert cell(text) == expected


@pytest.mark.parametrize("heading,expected", [
    ("trainyard catalog new", "trainyard-catalog-new"),
    ("trainyard platform usage-config", "trainyard-platform-usage-config"),
    ("`trainyard` x.y", "trainyard-xy"),
])
def test_anchor(heading, expected):
    assert anchor(heading) == expected


@pytest.mark.parametrize("text,expected", [
    ("Do it.\n\n    More.", "Do it.\n\nMore."),
    ("Shown.\f hidden", "Shown."),
    (None, ""),
])
def test_help_text(text, expected):
    assert help_text(text) == expected


@dataclass(frozen=True)
class Inner:
    """Inner keys."""

    size: int = 1
    """How big."""


@dataclass(frozen=True)
class Outer:
    name: str
    """The name."""
    alias: str = field(metadata=described_default("the name"), default="")
    count: int | None = None
    amount: Union[int, str] = 1
    inner: Inner = Inner()
    items: tuple[Inner, ...] = ()
    tags: tuple[str, ...] = ()
    resources: Mapping[str, object] = field(default_factory=dict)
    flag: bool = False


@pytest.mark.parametrize("name,type_text,default", [
    ("name", "string", "required"),
    ("alias", "string", "the name"),
    ("count", "integer", ""),
    ("amount", "quantity", "`1`"),
    ("inner", "mapping", ""),
    ("items", "list of mappings", "`[]`"),
    ("tags", "list of strings", "`[]`"),
    ("resources", "resources (name: quantity)", "`{}`"),
    ("flag", "boolean", "`false`"),
])
def test_stack_key_type_and_default(name, type_text, default):
    import typing
    f = next(f for f in dataclasses.fields(Outer) if f.name == name)
    assert type_name(typing.get_type_hints(Outer)[name]) == type_text
    assert default_text(f) == default


def test_stack_rows_walk_mappings_and_lists():
    rows = stack_rows(Outer, "x:")
    assert [r[0] for r in rows] == ["x:name", "x:alias", "x:count", "x:amount", "x:inner", "x:inner.size", "x:items",
                                    "x:items[].size", "x:tags", "x:resources", "x:flag"]
    assert dict((r[0], r[3]) for r in rows)["x:inner"] == "Inner keys."
    assert attribute_docs(Outer) == {"name": "The name."}


def option(**kw):
    base = dict(required=False, default=None, is_flag=False, multiple=False, opts=["--x"], secondary_opts=[],
                param_type_name="option", bare_type=lambda: "<int>")
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize("param,type_text,default", [
    (option(default=4), "integer", "`4`"),
    (option(required=True), "integer", "required"),
    (option(is_flag=True, default=False), "flag", "`false`"),
    (option(is_flag=True, default=True, opts=["--monitoring"], secondary_opts=["--no-monitoring"]), "flag",
     "`--monitoring`"),
    (option(is_flag=True, default=False, opts=["--monitoring"], secondary_opts=["--no-monitoring"]), "flag",
     "`--no-monitoring`"),
    (option(multiple=True, default=()), "list of integer", ""),
    (option(default="table", bare_type=lambda: "<str>"), "text", "`table`"),
])
def test_cli_param_type_and_default(param, type_text, default):
    assert (param_type(param), param_default(param)) == (type_text, default)


def test_schema_rules_and_bounds():
    rule = Rule("self >= 1", "must be positive", lambda v: v >= 1)
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-validations": [rule], "properties": {
            "n": {"type": "integer", "maximum": 5000},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "k": {"type": "string", "x-kubernetes-validations": [rule]}}}}}}}}
    assert schema_rules(schema) == [("spec", rule), ("spec.items[].k", rule)]
    assert schema_bounds(schema) == [("spec.n", "at most 5000")]


def test_reference_lives_under_docs():
    assert (repo_root() / REFERENCE_DIR).is_dir()
