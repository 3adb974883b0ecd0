"""The layer order, checked from the import statements: a module imports only from its own layer or below.

Lowest first (docs/architecture.md):

    ground      trainyard.{errors, problems, k8s, openapi, paths, yaml_input, field_markers, timestamps, waiting, stats,
                tenant_policy}
    toolchain   trainyard.toolchain (pins, Go module cache, builds, the pinned OpenAPI index, Flux templates),
                trainyard.images (container images built from pinned inputs, host packages)
    queues      trainyard.queues: Volcano scheduler configuration, queues, HyperNodes, priority classes
    controller  trainyard.controller: the pure TrainJob build pipeline, plugins, admission, status
    runtime     trainyard.controller.runtime | trainyard.runtimes (side by side: neither imports the other)
    platform    trainyard.platform: the stack model and the Pulumi program
    apps        trainyard.{scheduling, cluster, realnodes, capacity, schedtrace, whatif, usage, stack_deploy, main_job,
                pulumi_env, scale_stack, benchkit, benchmarks, docs_reference}
    cli         trainyard.cli: the Typer commands

Module names come from pyproject's `package-dir` (platform/ is `trainyard.platform`, ...); every import counts,
at module level or inside a function, absolute or relative, and `importlib.import_module("x")` / `__import__("x")`
with a literal name. A dynamic import of a computed name in the controller core or below is refused: no rule could
check it. The controller core (trainyard.controller without its runtime) also stays pure: no I/O clients, no
toolchain (`CORE_FORBIDS`), no file or environment reads; the runtime reads and hands it the data.

Packages of one floor (trainyard.capacity, trainyard.schedtrace, ...) may import each other one way only: their
import graph is acyclic. The pure scheduling model (cluster state as capacity, fairness, placement, reservation,
reclaim, the vc-scheduler simulator, start estimates) is one package, trainyard.scheduling, that capacity,
schedtrace and whatif use.

No source module is longer than 400 lines (`MAX_MODULE_LINES`): a longer one is split into cohesive modules whose
names say what each holds.

Each rule is a function over a scanned tree (`scan_tree`), run on the real tree and on planted scratch trees.
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
    ("toolchain", ("trainyard.toolchain", "trainyard.images")),
    ("queues", ("trainyard.queues",)),
    ("controller", ("trainyard.controller",)),
    ("runtime", ("trainyard.controller.runtime", "trainyard.runtimes")),
    ("platform", ("trainyard.platform",)),
    ("apps", ("trainyard.scheduling", "trainyard.cluster", "trainyard.realnodes", "trainyard.capacity", "trainyard.schedtrace",
              "trainyard.whatif", "trainyard.upgrade",
              "trainyard.stack_deploy",
              "trainyard.main_job", "trainyard.pulumi_env", "trainyard.scale_stack", "trainyard.benchkit", "trainyard.benchmarks",
              "trainyard.usage", "trainyard.docs_reference")),
    ("cli", ("trainyard.cli",)),
)
SIDE_BY_SIDE = ("trainyard.controller.runtime", "trainyard.runtimes")
"""Two rooms on one floor: each may use the floors below, not the other."""
CORE_FLOOR = 3
CORE_FORBIDS = ("kubernetes", "pulumi", "pulumi_kubernetes", "http", "socket", "ssl", "threading", "subprocess",
                "urllib", "typer", "trainyard.toolchain", "trainyard.images")
"""Modules the pure controller core never imports: I/O clients, and the toolchain floor, which reads pins, caches
and built files (the runtime owns all I/O and hands the core what it read)."""
MAX_MODULE_LINES = 400
"""The most lines a source module may have (every module of the distribution: src/, controller/, platform/, ...)."""


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (or package, for names that are not modules)
    line: int


@dataclass(frozen=True)
class Scan:
    """What the rules need of one module: its imports, dynamic imports whose target is no literal, and file or
    environment reads (with what was read)."""

    imports: tuple[Import, ...]
    unverifiable: tuple[int, ...]
    reads: tuple[tuple[int, str], ...]


def package_dirs(root: Path = ROOT) -> dict[str, str]:
    """Folder -> package name, from pyproject.toml's [tool.setuptools] package-dir."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    return {folder: package for package, folder in config["tool"]["setuptools"]["package-dir"].items()}


def source_modules(root: Path = ROOT, dirs: dict[str, str] | None = None) -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package __init__), every module of the tree's distribution."""
    modules: dict[str, tuple[Path, bool]] = {}
    for folder, package in (package_dirs(root) if dirs is None else dirs).items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if "releases" in parts:  # catalog templates, not code
                continue
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            modules[name] = (path, is_package)
    return modules


def _relative_target(package: str, level: int, module: str | None) -> str:
    base = package.split(".")
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _dynamic_import(node: ast.Call) -> str | None | bool:
    """The literal target of `importlib.import_module("x")` / `import_module("x")` / `__import__("x")`; None when
    the target is computed (or relative); False for any other call."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__"):
        return False
    first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
        return first.value
    return None


def _read(node: ast.AST) -> str | None:
    """What a node reads from the file system or the environment, or None: `open(...)`, `x.read_text()`,
    `x.read_bytes()`, `x.open()`, `os.environ`, `os.getenv`."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("open", "getenv"):
            return f"{func.id}()"
        if isinstance(func, ast.Attribute) and func.attr in ("read_text", "read_bytes", "open", "getenv"):
            return f".{func.attr}()"
    if isinstance(node, ast.Attribute) and node.attr in ("environ", "environb"):
        return f".{node.attr}"
    if isinstance(node, ast.Name) and node.id in ("environ", "environb"):
        return node.id
    if isinstance(node, ast.ImportFrom) and node.module == "os":
        names = [a.name for a in node.names if a.name in ("environ", "environb", "getenv")]
        return f"from os import {', '.join(names)}" if names else None
    return None


def scan_module(name: str, path: Path, is_package: bool, known: set[str]) -> Scan:
    """Every import of one module, resolved to absolute module names (`from x import y` names the module x.y when
    it exists, else x), dynamic imports of a literal name included; and its reads."""
    package = name if is_package else name.rsplit(".", 1)[0]
    found: list[Import] = []
    unverifiable: list[int] = []
    reads: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _relative_target(package, node.level, node.module) if node.level else node.module or ""
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.append(Import(name, child if child in known else target, node.lineno))
        elif isinstance(node, ast.Call) and (dynamic := _dynamic_import(node)) is not False:
            if dynamic is None:
                unverifiable.append(node.lineno)
            else:
                found.append(Import(name, dynamic, node.lineno))
        if (what := _read(node)) is not None:
            reads.append((getattr(node, "lineno", 0), what))
    return Scan(tuple(found), tuple(unverifiable), tuple(reads))


def imports_of(name: str, path: Path, is_package: bool, known: set[str]) -> list[Import]:
    return list(scan_module(name, path, is_package, known).imports)


def scan_tree(root: Path = ROOT, dirs: dict[str, str] | None = None) -> dict[str, Scan]:
    modules = source_modules(root, dirs)
    known = set(modules)
    return {name: scan_module(name, path, is_package, known) for name, (path, is_package) in modules.items()}


def layer_of(module: str) -> tuple[int, str] | None:
    """(floor, the longest matching room) of a trainyard module; None outside the project."""
    best: tuple[int, str] | None = None
    for floor, (_, rooms) in enumerate(LAYERS):
        for room in rooms:
            if module == room or (room != "trainyard" and module.startswith(room + ".")):
                if best is None or len(room) > len(best[1]):
                    best = (floor, room)
    return best


def in_pure_core(module: str) -> bool:
    return layer_of(module) == (CORE_FLOOR, "trainyard.controller")


def is_under(module: str, names: tuple[str, ...]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in names)


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


def layer_violations(scans: dict[str, Scan]) -> list[str]:
    return violations([i for scan in scans.values() for i in scan.imports if i.target.startswith("trainyard")])


def core_io_imports(scans: dict[str, Scan]) -> list[str]:
    """Imports of I/O clients (and of the toolchain, which reads the disk) by the pure controller core."""
    return sorted({f"{i.module}:{i.line} imports {i.target}" for name, scan in scans.items() if in_pure_core(name)
                   for i in scan.imports if is_under(i.target, CORE_FORBIDS)})


def core_reads(scans: dict[str, Scan]) -> list[str]:
    """File and environment reads in the pure controller core: the runtime reads, the core is given the data."""
    return [f"{name}:{line} reads {what}" for name, scan in scans.items() if in_pure_core(name)
            for line, what in scan.reads]


def unverifiable_imports(scans: dict[str, Scan]) -> list[str]:
    """Dynamic imports of a computed name in the pure core or below it: the layer rules cannot see their target."""
    return [f"{name}:{line} imports a computed module name" for name, scan in scans.items()
            if (floor := layer_of(name)) is not None and (floor[0] < CORE_FLOOR or in_pure_core(name))
            for line in scan.unverifiable]


def sibling_cycles(scans: dict[str, Scan]) -> list[list[str]]:
    """Cycles among the rooms of one floor (trainyard.capacity -> trainyard.schedtrace -> trainyard.capacity, even
    through imports inside functions): siblings may use each other one way only."""
    graph: dict[str, set[str]] = {}
    for scan in scans.values():
        for item in scan.imports:
            source, target = layer_of(item.module), layer_of(item.target)
            if source and target and source[0] == target[0] and source[1] != target[1]:
                graph.setdefault(source[1], set()).add(target[1])
    return strongly_connected(graph)


def long_modules(root: Path = ROOT, dirs: dict[str, str] | None = None, limit: int = MAX_MODULE_LINES) -> list[str]:
    """Source modules of more than `limit` lines, each as "its path in the tree: N lines"."""
    out = []
    for path, _ in source_modules(root, dirs).values():
        if (count := len(path.read_text().splitlines())) > limit:
            out.append(f"{path.relative_to(root)}: {count} lines (at most {limit})")
    return sorted(out)


@pytest.fixture(scope="module")
def real_tree() -> dict[str, Scan]:
    return scan_tree()


@pytest.fixture(scope="module")
def all_imports(real_tree) -> list[Import]:
    return [i for scan in real_tree.values() for i in scan.imports]


def test_every_module_has_a_layer():
    unplaced = [name for name in source_modules() if layer_of(name) is None]
    assert not unplaced, f"add these modules to a layer in {__file__}: {unplaced}"


def test_no_import_goes_up_or_sideways(real_tree):
    found = layer_violations(real_tree)
    assert not found, "imports against the layer order:\n" + "\n".join(found)


def test_the_controller_core_does_no_io(real_tree):
    assert any(in_pure_core(name) for name in real_tree), "the controller core was not found"
    found = core_io_imports(real_tree) + core_reads(real_tree)
    assert not found, "the controller core must stay pure:\n" + "\n".join(found)


def test_every_import_below_the_runtime_names_its_module(real_tree):
    found = unverifiable_imports(real_tree)
    assert not found, "dynamic imports the layer rules cannot check:\n" + "\n".join(found)


def test_no_cycle_between_packages_of_one_floor(real_tree):
    cycles = sibling_cycles(real_tree)
    assert not cycles, f"packages of one floor that import each other: {cycles}"


def test_no_module_cycles(all_imports):
    graph: dict[str, set[str]] = {}
    known = source_modules_set()
    for item in all_imports:
        if item.target != item.module and item.target in known:
            graph.setdefault(item.module, set()).add(item.target)
    cycles = strongly_connected(graph)
    assert not cycles, f"module cycles: {cycles}"


def test_no_source_module_is_over_the_line_limit():
    found = long_modules()
    assert not found, "split these into cohesive modules (no re-export shims):\n" + "\n".join(found)


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


PLANTED_DIRS = {"src/trainyard": "trainyard", "controller": "trainyard.controller", "cli": "trainyard.cli"}


def planted_tree(root: Path, files: dict[str, str]) -> dict[str, Scan]:
    """A scratch tree of packages (every folder gets an __init__.py) scanned by the same rules as the real one."""
    for folder in PLANTED_DIRS:
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "__init__.py").touch()
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(text)
    return scan_tree(root, PLANTED_DIRS)


@pytest.mark.parametrize("text", [
    'import importlib\nimportlib.import_module("trainyard.cli.main")\n',
    'from importlib import import_module\ndef f():\n    return import_module("trainyard.cli.main")\n',
    '__import__("trainyard.cli.main")\n',
])
def test_a_dynamic_import_of_a_literal_name_counts_as_an_import(tmp_path, text):
    tree = planted_tree(tmp_path, {"src/trainyard/k8s.py": text, "cli/main.py": ""})
    found = layer_violations(tree)
    assert len(found) == 1 and "trainyard.k8s:" in found[0] and "(ground -> cli)" in found[0], found


@pytest.mark.parametrize(("where", "reported"), [
    ("src/trainyard/k8s.py", True), ("controller/plugins/planted.py", True),
    ("controller/runtime/planted.py", False), ("cli/planted.py", False),
])
def test_a_dynamic_import_of_a_computed_name_is_unverifiable_in_the_core_and_below(tmp_path, where, reported):
    tree = planted_tree(tmp_path, {where: 'import importlib\ndef f(n):\n    return importlib.import_module(f"x.{n}")\n'})
    assert bool(unverifiable_imports(tree)) is reported, unverifiable_imports(tree)


@pytest.mark.parametrize("text", [
    'def f(p):\n    return open(p).read()\n',
    'from pathlib import Path\ndef f():\n    return Path("x").read_text()\n',
    'from pathlib import Path\ndef f():\n    return Path("x").read_bytes()\n',
    'from pathlib import Path\ndef f():\n    with Path("x").open() as h:\n        return h.read()\n',
    'import os\nHOME = os.environ.get("HOME")\n',
    'import os\ndef f():\n    return os.getenv("HOME")\n',
    'from os import environ\n',
])
def test_a_file_or_environment_read_in_the_core_is_found(tmp_path, text):
    core = planted_tree(tmp_path / "core", {"controller/plugins/planted.py": text})
    runtime = planted_tree(tmp_path / "runtime", {"controller/runtime/planted.py": text})
    assert core_reads(core) and not core_reads(runtime), (core_reads(core), core_reads(runtime))


@pytest.mark.parametrize("text", [
    "from trainyard.toolchain.versions import tool\n",
    "def f():\n    from trainyard.toolchain.k8s_fields import field_index\n",
    "import trainyard.images.build\n",
    "import subprocess\n",
])
def test_a_core_import_of_the_toolchain_or_an_io_client_is_found(tmp_path, text):
    tree = planted_tree(tmp_path, {"controller/plugins/planted.py": text, "src/trainyard/toolchain/versions.py": "",
                                   "src/trainyard/toolchain/k8s_fields.py": "", "src/trainyard/images/build.py": ""})
    assert len(core_io_imports(tree)) == 1, core_io_imports(tree)


def test_a_cycle_between_sibling_packages_is_found_even_inside_a_function(tmp_path):
    tree = planted_tree(tmp_path, {
        "src/trainyard/capacity/fit.py": "from trainyard.schedtrace.model import simulate\n",
        "src/trainyard/schedtrace/model.py": "def simulate():\n    from trainyard.capacity import fit\n",
        "src/trainyard/whatif/run.py": "from trainyard.capacity import fit\n"})
    assert sibling_cycles(tree) == [["trainyard.capacity", "trainyard.schedtrace"]]


def test_a_module_over_the_line_limit_is_found_by_path_and_length(tmp_path):
    planted_tree(tmp_path, {"src/trainyard/cluster/long.py": "x = 1\n" * 401,
                            "controller/plugins/at_limit.py": "x = 1\n" * MAX_MODULE_LINES})
    assert long_modules(tmp_path, PLANTED_DIRS) == ["src/trainyard/cluster/long.py: 401 lines (at most 400)"]


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
