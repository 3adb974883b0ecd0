"""Hostile YAML (issue 18.5): alias bombs, non-UTF-8 bytes, duplicate keys and oversized files are refused
with the file, the line and the fix, by the one reader every user-facing YAML read goes through, quickly and
within bounded memory, and never as a traceback."""

import resource
import subprocess
import sys
import textwrap

import pytest

from trainyard import yaml_input
from trainyard.platform.stack_source import parse_stack_source, read_stack_source
from trainyard.yaml_input import YamlInputError


def alias_bomb(levels: int = 9, fan: int = 9) -> str:
    """Each level's list repeats the previous level `fan` times: fan**levels nodes once expanded."""
    lines = ["a0: &a0 [" + ",".join(["lol"] * fan) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fan) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def stack_bomb() -> str:
    body = textwrap.indent(alias_bomb(), "  ")
    return f"config:\n{body}  trainyard:tenants: *a8\n"


@pytest.mark.parametrize("text,line,message", [
    ("a: 1\na: 2\n", 2, "duplicate key `a` (first at line 1)"),
    ("{a: 1, a: 2}\n", 1, "duplicate key `a`"),
    ("x:\n  - b: 1\n    b: 2\n", 3, "duplicate key `b` (first at line 2)"),
    ("config:\n  trainyard:tenants: []\n  trainyard:tenants: []\n", 3, "duplicate key `trainyard:tenants`"),
    (alias_bomb(), None, "aliases expand to more than"),
    ("a: [1,\n", None, "malformed YAML"),
])
def test_refused_yaml(text, line, message):
    with pytest.raises(YamlInputError) as err:
        list(yaml_input.load_all(text, "f.yaml"))
    assert message in str(err.value) and str(err.value).startswith("f.yaml")
    if line:
        assert err.value.line == line


@pytest.mark.parametrize("text,expected", [
    ("a: &x {k: 1}\nb:\n  <<: *x\n  j: 2\n", {"a": {"k": 1}, "b": {"k": 1, "j": 2}}),  # merge keys are not duplicates
    ("a: [1, 1]\nb: {c: 1}\n", {"a": [1, 1], "b": {"c": 1}}),
    ("base: &b [x, y]\nuse: [*b, *b]\n", {"base": ["x", "y"], "use": [["x", "y"], ["x", "y"]]}),
    ("", None),
])
def test_accepted_yaml(text, expected):
    assert yaml_input.load(text, "f.yaml") == expected


def test_non_utf8_bytes_name_the_offset_and_line():
    with pytest.raises(YamlInputError) as err:
        yaml_input.decode("a: 1\nname: caf\xe9\n".encode("latin-1"), "tj.yaml")
    assert str(err.value).startswith("tj.yaml:2: byte 0xe9 at byte offset 14 is not UTF-8")
    assert "save the file as UTF-8" in str(err.value)


def test_oversized_input_is_refused():
    with pytest.raises(YamlInputError, match="more than the limit"):
        yaml_input.decode(b"#" * (yaml_input.MAX_BYTES + 1), "big.yaml")


@pytest.mark.parametrize("text,message", [
    ("config:\n  trainyard:tenants: []\n  trainyard:tenants: []\n", "duplicate key `trainyard:tenants`"),
    ("config:\n  trainyard:tenants:\n    - name: team-a\n      catalogVersion: 1.2.0\n      catalogVersion: 1.1.0\n",
     "duplicate key `catalogVersion`"),
    (stack_bomb(), "aliases expand to more than"),
])
def test_stack_files_with_hostile_yaml_are_one_clear_problem(text, message):
    source = parse_stack_source(text, "stacks/Pulumi.x.yaml")
    assert source.values == {} and source.problem is not None
    assert message in str(source.problem) and source.problem.field == "file"


def test_stack_file_with_latin1_byte(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_bytes("config:\n  trainyard:clusterName: caf\xe9\n".encode("latin-1"))
    problem = read_stack_source(path, "stacks/Pulumi.x.yaml").problem
    assert problem is not None and problem.line == 2 and "byte 0xe9" in str(problem)


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "trainyard.cli", *args], capture_output=True, text=True,
                          timeout=120, preexec_fn=_limit_memory, cwd=cwd)


TRAINJOB = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x, namespace: team-a}\n" \
           "spec:\n  runtimeRef: {name: torch-distributed-volcano}\n"


@pytest.mark.parametrize("content,message", [
    ((TRAINJOB + "  labels: {owner: caf\xe9}\n").encode("latin-1"), "byte 0xe9 at byte offset"),
    ((TRAINJOB + "  trainer: {numNodes: 1}\n  trainer: {numNodes: 2}\n").encode(), "duplicate key `trainer`"),
    ((alias_bomb() + TRAINJOB).encode(), "aliases expand to more than"),
])
@pytest.mark.parametrize("command", ["validate", "render"])
def test_trainjob_commands_refuse_hostile_yaml_without_traceback(tmp_path, content, message, command):
    path = tmp_path / "tj.yaml"
    path.write_bytes(content)
    run = _cli(command, str(path), "--catalog", "1.2.0", "--tenant", "team-a")
    assert run.returncode == 2 and message in run.stderr and str(path) in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_platform_validate_refuses_an_alias_bomb_within_bounded_memory(tmp_path):
    """Before: the line-number walk expanded the aliases (exponential time and memory)."""
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.bomb.yaml").write_text(stack_bomb())
    code = f"""
import sys
from pathlib import Path
from trainyard.stack_deploy import validate
sys.exit(validate("bomb", echo=print, root=Path({str(tmp_path)!r})))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         preexec_fn=_limit_memory)
    assert run.returncode == 1 and "aliases expand to more than" in run.stdout, run.stdout + run.stderr
