"""controller/Dockerfile stays correct without a container engine: the files it copies exist, the wheel
it builds from exactly those files installs, and the entry point it names runs from that install."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from trainyard.paths import repo_root

DOCKERFILE = repo_root() / "controller" / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in text.splitlines():
        if line.strip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            keyword, _, rest = pending.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
            pending = ""
    return out


def context_copies(steps: list[tuple[str, str]]) -> list[tuple[list[str], str]]:
    """COPY steps that read the build context (not --from another stage): (sources, destination)."""
    copies = []
    for keyword, rest in steps:
        if keyword == "COPY" and "--from=" not in rest:
            *sources, destination = shlex.split(rest)
            copies.append((sources, destination))
    return copies


STEPS = instructions(DOCKERFILE.read_text(encoding="utf-8"))


def test_the_parser_reads_the_dockerfile():
    keywords = [k for k, _ in STEPS]
    assert keywords.count("FROM") == 3 and "ENTRYPOINT" in keywords and "CMD" in keywords
    assert len(context_copies(STEPS)) >= 7


@pytest.mark.parametrize("sources,destination", context_copies(STEPS), ids=lambda v: str(v))
def test_every_file_the_image_copies_exists(sources, destination):
    for source in sources:
        assert (repo_root() / source).exists(), f"controller/Dockerfile copies {source}, which does not exist"


def test_flux_templates_the_image_copies_exist_in_the_pinned_module():
    from trainyard.toolchain.build import ensure_built
    from trainyard.toolchain.modules import module_dir
    from trainyard.toolchain.versions import tool

    ensure_built("kubeflow-trainer")
    (go_step,) = [rest for k, rest in STEPS if k == "RUN" and "go mod download" in rest]
    relative = re.search(r"trainer/v2\)/(\S+?)\"", go_step).group(1)
    assert relative == "pkg/runtime/framework/plugins/flux/templates"
    templates = module_dir(tool("kubeflow-trainer"), "github.com/kubeflow/trainer/v2") / relative
    assert {p.name for p in templates.iterdir()} >= {"entrypoint.sh", "init.sh"}


def copy_like_docker(source: Path, context: Path, destination: str) -> None:
    """COPY semantics used here: a directory's contents go to the destination; a file goes into a
    destination ending in '/' or becomes the destination path."""
    target = context / destination
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    elif destination.endswith("/"):
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target / source.name)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)


@pytest.fixture(scope="module")
def image_install(tmp_path_factory) -> Path:
    """What the build stage does, from exactly the copied files: `pip wheel .`, then install it alone."""
    root = tmp_path_factory.mktemp("image")
    context = root / "src"
    for sources, destination in context_copies(STEPS):
        for source in sources:
            copy_like_docker(repo_root() / source, context, destination)
    wheels = root / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "--wheel-dir", str(wheels), str(context)], check=True, capture_output=True, text=True)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # Dependencies come from the test venv (appended to sys.path after the fresh site-packages, so the
    # installed wheel, not the editable checkout, provides `trainyard`).
    fresh_site = next((venv / "lib").glob("python*/site-packages"))
    (fresh_site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = wheels.glob("trainyard-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True, text=True)
    return venv


def test_the_installed_image_package_is_the_wheel_not_the_checkout(image_install):
    probe = ("import json, trainyard.controller.runtime.manager as m, trainyard.runtimes as r, pathlib;"
             "print(json.dumps([m.__file__, sorted(p.name for p in (pathlib.Path(r.__file__).parent / 'releases').iterdir())]))")
    out = subprocess.run([str(image_install / "bin" / "python"), "-c", probe], check=True, capture_output=True, text=True)
    manager_file, releases = json.loads(out.stdout)
    assert manager_file.startswith(str(image_install)), manager_file
    assert "1.2.0" in releases, "catalog templates ship as package data"


def test_the_entry_point_the_image_names_runs(image_install):
    (entrypoint,) = [json.loads(rest) for k, rest in STEPS if k == "ENTRYPOINT"]
    (cmd,) = [json.loads(rest) for k, rest in STEPS if k == "CMD"]
    assert entrypoint[:3] == ["trainyard", "controller", "run"]
    script = image_install / "bin" / entrypoint[0]
    help_text = subprocess.run([str(script), *entrypoint[1:], "--help"], check=True, capture_output=True,
                               text=True).stdout
    for flag in cmd:
        assert flag.split("=", 1)[0] in help_text, f"CMD passes {flag}, which `{' '.join(entrypoint)}` lacks"
    module_run = subprocess.run([str(image_install / "bin" / "python"), "-m", "trainyard.cli", *entrypoint[1:], "--help"],
                                capture_output=True, text=True)
    assert module_run.returncode == 0, module_run.stderr


def test_the_deployment_command_is_accepted_by_the_image_entry_point(image_install):
    """The stack's Deployment overrides the command; every flag it passes must exist in the image."""
    from trainyard.platform.controller_objects import render_controller_deployment
    from trainyard.platform.stack_config import ControllerSpec

    container = render_controller_deployment(ControllerSpec(feature_gates="TrainJobStatus=true"))["spec"]["template"]["spec"]["containers"][0]
    command = container["command"]
    help_text = subprocess.run([str(image_install / "bin" / command[0]), *command[1:3], "--help"], check=True,
                               capture_output=True, text=True,
                               env={**os.environ, "COLUMNS": "200"}).stdout  # long flags unabridged
    for flag in command[3:]:
        assert flag.split("=", 1)[0] in help_text, flag
