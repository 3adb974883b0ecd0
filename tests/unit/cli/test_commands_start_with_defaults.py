"""Every CLI command starts with its defaults.

Typer fills an option the caller leaves out with its OptionInfo object when a command function is
called as a plain Python function; that once crashed `trainyard up` (and `make up`) on every fresh
machine. So: (1) no code calls a Typer command function, (2) every command's options resolve to real
values through the same Click parsing the entry point uses, and (3) every command answers `--help`.
"""

from __future__ import annotations

import ast

import pytest
import typer
from typer.models import ParameterInfo
from typer.testing import CliRunner

from trainyard.cli.main import app
from trainyard.paths import repo_root

SOURCE_DIRS = ("src/trainyard", "controller", "runtimes", "platform", "queues")


def _commands(group, prefix: tuple[str, ...] = ()):
    """(path, command) of every leaf command; Typer vendors Click, so groups are found by duck typing."""
    if hasattr(group, "commands"):
        for name, command in sorted(group.commands.items()):
            yield from _commands(command, prefix + (name,))
    else:
        yield prefix, group


ROOT = typer.main.get_command(app)
COMMANDS = list(_commands(ROOT))
IDS = [" ".join(path) for path, _ in COMMANDS]


def _is_command_decorator(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "command")


def _command_functions(tree: ast.AST) -> set[str]:
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
            and any(_is_command_decorator(d) for d in node.decorator_list)}


def _calls(tree: ast.AST) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):  # `up(...)`; `local.up(...)` is another module's function
                out.append((node.func.id, node.lineno))
    return out


def test_the_cli_has_the_contract_commands():
    assert {"up", "down", "cluster up", "cluster down", "platform up", "platform whatif", "render", "validate", "catalog list",
            "tools build"} <= set(IDS)


def test_no_code_calls_a_typer_command_function():
    """Commands share plain functions; a command called as a function gets OptionInfo for omitted options."""
    root = repo_root()
    files = [p for d in SOURCE_DIRS for p in sorted((root / d).rglob("*.py"))]
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in files}
    per_module = {p: _command_functions(t) for p, t in trees.items()}
    assert sum(len(v) for v in per_module.values()) >= len(COMMANDS) - 2, "the scan finds the command functions"
    offenders = []
    for path, tree in trees.items():
        commands_here = per_module[path]
        imported = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    for alias in node.names
                    if any(alias.name in per_module[p] for p in per_module if p.stem == (node.module or "").rsplit(".", 1)[-1])}
        for name, line in _calls(tree):
            if name in commands_here | imported:
                offenders.append(f"{path.relative_to(root)}:{line} calls command function {name}()")
    assert offenders == []


@pytest.mark.parametrize("path,command", COMMANDS, ids=IDS)
def test_every_option_resolves_to_a_real_default(path, command):
    """Parse each command's defaults the way `trainyard ...` does; required arguments get a placeholder."""
    args = []
    for param in command.params:
        if param.required:
            if param.param_type_name == "argument":
                args.append("placeholder")
            else:
                args += [param.opts[0], "placeholder"]
    ctx = command.make_context(" ".join(path), args, parent=ROOT.context_class(ROOT, info_name="trainyard"))
    for name, value in ctx.params.items():
        assert not isinstance(value, ParameterInfo), f"trainyard {' '.join(path)}: option {name} defaults to {value!r}"


@pytest.mark.parametrize("path,command", COMMANDS, ids=IDS)
def test_every_command_answers_help(path, command):
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_the_calls_scan_catches_a_command_called_as_a_function(tmp_path):
    """The scan above is not vacuous: it flags exactly the shape of the `make up` crash."""
    tree = ast.parse("import typer\napp = typer.Typer()\n@app.command('up')\ndef up(x: int = typer.Option(1)):\n"
                     "    pass\ndef top():\n    up()\n")
    assert _command_functions(tree) == {"up"}
    assert ("up", 7) in _calls(tree)
