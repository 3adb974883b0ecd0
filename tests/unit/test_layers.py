"""The layer order, checked from the import statements: a module imports only from its own layer or below.

Lowest first (docs/architecture.md):

    ground      trainyard.{errors, problems, k8s, openapi, paths, yaml_input, field_markers, timestamps, waiting, stats,
                tenant_policy}
    toolchain   trainyard.toolchain (pins, Go module cache, builds), trainyard.k8s_fields (the pinned OpenAPI index),
                trainyard.images (container images built from pinned inputs, host packages)
    queues      trainyard.queues: Volcano scheduler configuration, queues, HyperNodes, priority classes
    controller  trainyard.controller: the pure TrainJob build pipeline, plugins, admission, status
    runtime     trainyard.controller.runtime | trainyard.runtimes (side by side: neither imports the other)
    platform    trainyard.platform: the stack model and the Pulumi program
    apps        trainyard.{cluster, realnodes, capacity, schedtrace, whatif, usage, stack_deploy, main_job, pulumi_env,
                scale_stack, benchkit, docs_reference}
    cli         trainyard.cli: the Typer commands

Module names come from pyproject's `package-dir` (platform/ is `trainyard.platform`, ...); every import counts,
at module level or inside a function, absolute or relative. The controller core also stays free of I/O clients.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", ("trainyard", "trainyard.errors", "trainyard.problems", "trainyard.k8s", "trainyard.openapi",
                "trainyard.paths", "trainyard.yaml_input", "trainyard.field_markers", "trainyard.timestamps",
                "trainyard.waiting", "trainyard.stats", "trainyard.profiles", "trainyard.tenant_policy")),
    ("toolchain", ("trainyard.toolchain", "trainyard.k8s_fields", "trainyard.images")),
    ("queues", ("trainyard.queues",)),
    ("controller", ("trainyard.controller",)),
    ("runtime", ("trainyard.controller.runtime", "trainyard.runtimes")),
    ("platform", ("trainyard.platform",)),
    ("apps", ("trainyard.cluster", "trainyard.realnodes", "trainyard.capacity", "trainyard.schedtrace", "trainyard.whatif",
              "trainyard.stack_deploy",
              "trainyard.main_job", "trainyard.pulumi_env", "trainyard.scale_stack", "trainyard.benchkit", "trainyard.benchmarks",
              "trainyard.usage", "trainyard.docs_reference")),
    ("cli", ("trainyard.cli",)),
)
SIDE_BY_SIDE = ("trainyard.controller.runtime", "trainyard.runtimes")
"""Two rooms on one floor: each may use the floors below, not the other."""
CORE_FORBIDS = ("kubernetes", "pulumi", "pulumi_kubernetes", "http", "socket", "ssl", "threading", "subprocess",
                "urllib", "typer")
"""Third-party and standard modules the pure controller core never imports (the runtime owns all I/O)."""


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (or package, for names that are not modules)
    line: int


def package_dirs() -> dict[str, str]:
    """Folder -> package name, from pyproject.toml's [tool.setuptools] package-dir."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {folder: package for package, folder in config["tool"]["setuptools"]["package-dir"].items()}


def source_modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package __init__), every module of the installed distribution."""
    modules: dict[str, tuple[Path, bool]] = {}
    for folder, package in package_dirs().items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if "releases" in parts:  # catalog templates, not code
                continue
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            modules[name] = (path, is_package)
    return modules


def imports_of(name: str, path: Path, is_package: bool, known: set[str]) -> list[Import]:
    """Every import statement of one module, resolved to absolute module names (`from x import y` names the
    module x.y when it exists, else x)."""
    package = name if is_package else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.append(Import(name, child if child in known else target, node.lineno))
    return found


def layer_of(module: str) -> tuple[int, str] | None:
    """(floor, the longest matching room) of a trainyard module; None outside the project."""
    best: tuple[int, str] | None = None
    for floor, (_, rooms) in enumerate(LAYERS):
        for room in rooms:
            if module == room or (room != "trainyard" and module.startswith(room + ".")):
                if best is None or len(room) > len(best[1]):
                    best = (floor, room)
    return best


def violations(imports: list[Import]) -> list[str]:
    out = []
    for item in imports:
        source, target = layer_of(item.module), layer_of(item.target)
        if source is None or target is None:
            continue
        upward = target[0] > source[0]
        sideways = (target[0] == source[0] and source[1] != target[1] and source[1] in SIDE_BY_SIDE
                    and target[1] in SIDE_BY_SIDE)
        if upward or sideways:
            out.append(f"{item.module}:{item.line} imports {item.target} "
                       f"({LAYERS[source[0]][0]} -> {LAYERS[target[0]][0]})")
    return out


@pytest.fixture(scope="module")
def all_imports() -> list[Import]:
    modules = source_modules()
    known = set(modules)
    return [i for name, (path, is_package) in modules.items() for i in imports_of(name, path, is_package, known)]


def test_every_module_has_a_layer():
    unplaced = [name for name in source_modules() if layer_of(name) is None]
    assert not unplaced, f"add these modules to a layer in {__file__}: {unplaced}"


def test_no_import_goes_up_or_sideways(all_imports):
    found = violations([i for i in all_imports if i.target.startswith("trainyard")])
    assert not found, "imports against the layer order:\n" + "\n".join(found)


def test_the_controller_core_does_no_io(all_imports):
    core = [i for i in all_imports if layer_of(i.module) == (3, "trainyard.controller")]
    assert core, "the controller core was not found"
    found = [f"{i.module}:{i.line} imports {i.target}" for i in core if i.target.split(".")[0] in CORE_FORBIDS]
    assert not found, "the controller core must stay pure:\n" + "\n".join(found)


def test_no_module_cycles(all_imports):
    graph: dict[str, set[str]] = {}
    known = source_modules_set()
    for item in all_imports:
        if item.target != item.module and item.target in known:
            graph.setdefault(item.module, set()).add(item.target)
    cycles = strongly_connected(graph)
    assert not cycles, f"module cycles: {cycles}"


def source_modules_set() -> set[str]:
    return set(source_modules())


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.mark.parametrize(("module", "line", "expected"), [
    ("trainyard.queues.scheduler_config", "from trainyard.platform.problems import ConfigProblem", "queues -> platform"),
    ("trainyard.controller.plugins.flux", "    from trainyard.controller.runtime.apiserver import RESOURCES",
     "controller -> runtime"),
    ("trainyard.runtimes.lint", "from trainyard.controller.runtime import reconciler", "runtime -> runtime"),
    ("trainyard.controller.build", "from .runtime.cache import CachedReads", "controller -> runtime"),
    ("trainyard.k8s", "from trainyard.cli.main import app", "ground -> cli"),
])
def test_the_check_catches_a_wrong_way_import(tmp_path, module, line, expected):
    """The checker itself: planted wrong-way imports, absolute, relative and inside a function, are found."""
    path = tmp_path / "planted.py"
    path.write_text(f"def f():\n{line}\n" if line.startswith(" ") else f"{line}\n")
    known = source_modules_set()
    found = violations(imports_of(module, path, False, known))
    assert len(found) == 1 and f"({expected})" in found[0], found


def test_the_cycle_check_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_controller_process_imports_no_other_command():
    """`python -m trainyard.cli.controller run` (local clusters, the image) loads its runtime, not the CLI's areas."""
    probe = ("import sys, trainyard.cli.controller; "
             "print(' '.join(sorted(m for m in sys.modules if m.startswith(('trainyard.cli', 'trainyard.platform', "
             "'trainyard.runtimes', 'trainyard.cluster', 'pulumi')))))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["trainyard.cli", "trainyard.cli.controller"], run.stdout


def test_test_module_basenames_are_unique():
    """pytest imports test modules by basename (tests/ has no packages): two test_x.py in different folders
    make collection fail with "import file mismatch" (it did, for test_failures.py)."""
    names: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name != "conftest.py" and "__pycache__" not in path.parts:
            names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: where for name, where in names.items() if len(where) > 1} == {}
