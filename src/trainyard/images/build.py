"""The images real nodes run, built from pinned inputs and cached like the toolchain.

- `pause`: the pod sandbox, compiled from `build/pause/linux/pause.c` of the pinned Kubernetes module.
- `training`: Debian (debootstrap from the apt mirror this machine is configured with) with Python, OpenMPI and
  an SSH server, torch installed from PyPI wheels whose hashes tools/images/training/requirements.txt pins,
  and the project's small training scripts in /opt/trainyard/scripts (its modules, `trainyard_checkpoint`, in
  the venv's site-packages).
- `controller`: Debian with Python, the project's dependencies from the wheels tools/images/controller/
  requirements.txt pins by hash, the project's own wheel built from the files controller/Dockerfile copies,
  and upstream's Flux templates from the pinned Trainer module: what the Dockerfile builds, without an engine.

An image's tag is a hash of its inputs, so a changed input is a new image and a cached one is never stale.
Each lives in ~/.cache/trainyard/images/<name>-<tag>/ as an OCI layout plus `image.json` (ref, digest, size,
build seconds).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from trainyard.images import oci
from trainyard.images.logrun import reporting_steps, run_to_log
from trainyard.images.debian import DEBIAN_MIRROR, DEBIAN_SUITE, IMAGE_BUILD_PACKAGES, debootstrap
from trainyard.toolchain.host_packages import ensure_host_packages
from trainyard.paths import cache_dir, repo_root

REGISTRY = "trainyard.local"
LOCAL_TAG = "local"
"""Every image is also named <registry>/<name>:local, the newest build: what examples and overrides name, so a
rebuilt image needs no edit (nodes hold only what this checkout built; nothing is ever pulled)."""
IMAGE_SOURCES = Path("tools/images")
TRAINING_PACKAGES = ("python3", "python3-venv", "ca-certificates", "openmpi-bin", "mpich",
                     "openssh-server", "openssh-client", "procps")
"""OpenMPI keeps `mpirun` (its alternative has the higher priority); MPICH's Hydra is `mpiexec.hydra`."""
TRAINING_ENV = {"PATH": "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
PYTHON_TAG = ("3.11", "cp")  # bookworm's python3


@dataclass(frozen=True)
class ImageRecipe:
    name: str
    inputs: tuple[tuple[str, bytes], ...]  # (what, content): everything that decides the image
    build_rootfs: Callable[[Path, Path], None]  # (rootfs, log) -> fills rootfs
    cmd: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    user: str = ""
    release: str = ""
    """Built from a release's files (`v0.3.0`), not the checkout's: cached and named apart, never `:local`."""

    @property
    def tag(self) -> str:
        digest = hashlib.sha256()
        config = ("config", repr((self.cmd, self.env, self.user)).encode())  # the image config decides it too
        for what, content in (*self.inputs, config):
            digest.update(what.encode() + b"\0" + hashlib.sha256(content).digest())
        return digest.hexdigest()[:16]

    @property
    def ref(self) -> str:
        return f"{REGISTRY}/{self.name}:{self.tag}"

    @property
    def alias(self) -> str:
        return f"{REGISTRY}/{self.name}:{self.release or LOCAL_TAG}"

    @property
    def lineage(self) -> str:
        """The cache's name for builds that replace each other: the checkout's, or one release's."""
        return f"{self.name}@{self.release}" if self.release else self.name

    @property
    def directory(self) -> Path:
        return cache_dir() / "images" / f"{self.lineage}-{self.tag}"


def pause_recipe() -> ImageRecipe:
    from trainyard.toolchain.modules import module_dir
    from trainyard.toolchain.versions import tool

    source = module_dir(tool("kube-node"), "k8s.io/kubernetes") / "build" / "pause" / "linux" / "pause.c"
    text = source.read_bytes()

    def build(rootfs: Path, log: Path) -> None:
        rootfs.mkdir(parents=True)
        run_to_log(["gcc", "-Os", "-Wall", "-static", f"-DVERSION=trainyard-{tool('kube-node').version}",
              "-o", str(rootfs / "pause"), str(source)], log)

    return ImageRecipe("pause", (("pause.c", text),), build, cmd=("/pause",))


def training_sources() -> dict[str, bytes]:
    base = repo_root() / IMAGE_SOURCES / "training"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def wheel_dir() -> Path:
    return cache_dir() / "wheels"


def download_wheels(requirements: Path, log: Path) -> None:
    """Fetch the pinned wheels (hash-checked by pip) for bookworm's Python into the shared wheel cache."""
    version, implementation = PYTHON_TAG
    wheel_dir().mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_FIND_LINKS")}
    run_to_log([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes", "--only-binary=:all:",
          "--python-version", version, "--implementation", implementation,
          "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
          "--platform", "manylinux2014_x86_64", "--platform", "manylinux2010_x86_64", "--platform", "manylinux_2_12_x86_64",
          "--platform", "manylinux_2_27_x86_64", "-d", str(wheel_dir()), "-r", str(requirements)], log, env)


CHROOT_ENV = {"PATH": TRAINING_ENV["PATH"], "HOME": "/root", "LANG": "C.UTF-8"}
"""What commands run inside an image's root filesystem see (nothing of the host's environment)."""


def install_pinned_wheels(rootfs: Path, requirements: Path, log: Path, extra_wheels: Path | None = None) -> None:
    """A venv at /opt/venv holding exactly the hash-pinned wheels of `requirements` (from the shared wheel cache,
    staged by hard links: same file system, no copy), then the wheels in `extra_wheels` (built here, not pinned)."""
    download_wheels(requirements, log)
    staged = rootfs / "tmp" / "wheels"
    shutil.copytree(wheel_dir(), staged, copy_function=os.link)
    shutil.copyfile(requirements, staged / "requirements.txt")
    run_to_log(["chroot", str(rootfs), "python3", "-m", "venv", "/opt/venv"], log, CHROOT_ENV)
    run_to_log(["chroot", str(rootfs), "/opt/venv/bin/pip", "install", "--quiet", "--no-index", "--no-deps",
                "--require-hashes", "--find-links", "/tmp/wheels", "-r", "/tmp/wheels/requirements.txt"], log, CHROOT_ENV)
    if extra_wheels is not None:
        shutil.copytree(extra_wheels, staged / "extra")
        names = sorted(p.name for p in (staged / "extra").glob("*.whl"))
        run_to_log(["chroot", str(rootfs), "/opt/venv/bin/pip", "install", "--quiet", "--no-index", "--no-deps",
                    *(f"/tmp/wheels/extra/{name}" for name in names)], log, CHROOT_ENV)
    shutil.rmtree(staged)


def drop_apt_caches(rootfs: Path) -> None:
    for cache in (rootfs / "var" / "cache" / "apt", rootfs / "var" / "lib" / "apt" / "lists"):
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)


MPI_USER = (1000, "mpiuser")
"""What the catalog's MPI runtimes expect of an image (values.yaml `mpi`, as mpi-operator's images): sshd runs
as uid 1000 on port 2222 with /home/mpiuser/.sshd_config and the controller's keys in /home/mpiuser/.ssh."""
SSHD_CONFIG = """Port 2222
PidFile /home/mpiuser/sshd.pid
HostKey /home/mpiuser/.ssh/id_rsa
StrictModes no
"""
SSH_CLIENT_CONFIG = """Host *
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
    Port 2222
"""


def _mpi_user(rootfs: Path, log: Path, env: dict[str, str]) -> None:
    uid, name = MPI_USER
    run_to_log(["chroot", str(rootfs), "useradd", "--create-home", "--uid", str(uid), "--shell", "/bin/bash", name],
               log, env)
    home = rootfs / "home" / name
    (home / ".sshd_config").write_text(SSHD_CONFIG)
    (rootfs / "etc" / "ssh" / "ssh_config.d" / "trainyard.conf").write_text(SSH_CLIENT_CONFIG)
    (rootfs / "run" / "sshd").mkdir(parents=True, exist_ok=True)
    for path in (home, home / ".sshd_config"):
        os.chown(path, uid, uid)


TRAINING_SITE_PACKAGES = f"/opt/venv/lib/python{PYTHON_TAG[0]}/site-packages"
"""Where tools/images/training/site/ goes: modules any training process imports (`trainyard_checkpoint`)."""
INITIALIZER_SCRIPT = "/opt/trainyard/scripts/initializer.py"
"""The training image's default command: the stand-in dataset/model initializer (the catalog's initializer
containers name no command; every other container does)."""


def training_recipe() -> ImageRecipe:
    sources = training_sources()
    base = repo_root() / IMAGE_SOURCES / "training"

    def build(rootfs: Path, log: Path) -> None:
        debootstrap(rootfs, TRAINING_PACKAGES, log)
        install_pinned_wheels(rootfs, base / "requirements.txt", log)
        places = {"scripts/": rootfs / "opt" / "trainyard", "site/": rootfs / TRAINING_SITE_PACKAGES.lstrip("/")}
        for relative, content in sources.items():
            for prefix, root in places.items():
                if relative.startswith(prefix):
                    target = root / (relative if prefix == "scripts/" else relative[len(prefix):])
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(content)
        _mpi_user(rootfs, log, CHROOT_ENV)
        drop_apt_caches(rootfs)

    inputs = (("debian", f"{DEBIAN_SUITE} {DEBIAN_MIRROR} {' '.join(TRAINING_PACKAGES)}".encode()),
              ("mpi", f"{MPI_USER} {SSHD_CONFIG} {SSH_CLIENT_CONFIG}".encode()),
              *sorted(sources.items()))
    return ImageRecipe("training", inputs, build, cmd=("python3", INITIALIZER_SCRIPT), env=tuple(TRAINING_ENV.items()))


CONTROLLER_PACKAGES = ("python3", "python3-venv", "ca-certificates")
CONTROLLER_CONTEXT = ("pyproject.toml", "README.md", "src", "controller", "platform", "runtimes", "queues",
                      "tools/versions.toml")
"""The checkout files the project's wheel is built from: controller/Dockerfile's COPY list (a unit test keeps
the two the same)."""
README = "README.md"
README_IN_IMAGE = b"trainyard: see README.md in the repository.\n"
CONTROLLER_USER = "65532:65532"
FLUX_TEMPLATES_IN_IMAGE = "/opt/trainyard/flux"


def controller_context(root: Path | None = None) -> dict[str, bytes]:
    """Every file of the context, by path relative to the checkout (caches and bytecode left out)."""
    root = root or repo_root()
    files: dict[str, bytes] = {}
    for entry in CONTROLLER_CONTEXT:
        path = root / entry
        for item in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if item.is_file() and "__pycache__" not in item.parts and item.suffix != ".pyc":
                files[str(item.relative_to(root))] = item.read_bytes()
    if README in files:  # only the wheel's long description: a documentation edit must not rebuild the image
        files[README] = README_IN_IMAGE
    return files


def _flux_templates() -> Path:
    from trainyard.toolchain.build import ensure_built
    from trainyard.toolchain.modules import module_dir
    from trainyard.toolchain.versions import tool

    ensure_built("kubeflow-trainer")
    module = module_dir(tool("kubeflow-trainer"), "github.com/kubeflow/trainer/v2")
    return module / "pkg" / "runtime" / "framework" / "plugins" / "flux" / "templates"


def controller_recipe(root: Path | None = None, release: str = "") -> ImageRecipe:
    """The controller image of the checkout, or of a release's files under `root` (images.releases)."""
    context = controller_context(root)
    requirements = (root or repo_root()) / IMAGE_SOURCES / "controller" / "requirements.txt"
    env = {"PATH": TRAINING_ENV["PATH"], "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "TRAINYARD_FLUX_TEMPLATES": FLUX_TEMPLATES_IN_IMAGE}

    def build(rootfs: Path, log: Path) -> None:
        debootstrap(rootfs, CONTROLLER_PACKAGES, log)
        with tempfile.TemporaryDirectory() as scratch:  # the project's wheel from exactly the context's files
            source, wheels = Path(scratch) / "source", Path(scratch) / "wheels"
            for relative, content in context.items():
                (source / relative).parent.mkdir(parents=True, exist_ok=True)
                (source / relative).write_bytes(content)
            run_to_log([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--wheel-dir", str(wheels), str(source)], log)
            install_pinned_wheels(rootfs, requirements, log, extra_wheels=wheels)
        shutil.copytree(_flux_templates(), rootfs / FLUX_TEMPLATES_IN_IMAGE.lstrip("/"))
        drop_apt_caches(rootfs)

    inputs = (("debian", f"{DEBIAN_SUITE} {DEBIAN_MIRROR} {' '.join(CONTROLLER_PACKAGES)}".encode()),
              ("requirements", requirements.read_bytes()), ("user", CONTROLLER_USER.encode()),
              *sorted(context.items()))
    return ImageRecipe("controller", inputs, build, cmd=("trainyard", "controller", "run"), env=tuple(env.items()),
                       user=CONTROLLER_USER, release=release)


RECIPES: dict[str, Callable[[], ImageRecipe]] = {"pause": pause_recipe, "training": training_recipe,
                                                  "controller": controller_recipe}
NODE_IMAGES = ("pause", "training")
"""What every real node holds from `cluster up`; others (the controller) are loaded when asked for."""


def image_record(recipe: ImageRecipe) -> dict | None:
    """The cached image's record, or None when it is not built."""
    record = recipe.directory / "image.json"
    if not record.is_file() or not (recipe.directory / "layout" / "index.json").is_file():
        return None
    return json.loads(record.read_text())


def build_image(recipe: ImageRecipe, echo: Callable[[str], None] = lambda _: None) -> dict:
    """Build the image unless cached; returns its record (ref, digest, size, seconds, layout)."""
    cached = image_record(recipe)
    if cached:
        return cached
    ensure_host_packages(IMAGE_BUILD_PACKAGES, echo=echo)
    directory = recipe.directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    log = cache_dir() / "logs" / f"image-{recipe.name}-{recipe.tag}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"# building {recipe.ref}\n")
    last = last_build_file(recipe.name)
    typical = float(last.read_text()) if last.is_file() else None
    echo(f"building image {recipe.ref} (log {log})" + (f"; the last build took {typical:.0f} s" if typical else ""))
    started = time.monotonic()
    rootfs = directory / "rootfs"
    try:
        with reporting_steps(f"image {recipe.name}", echo, typical):
            recipe.build_rootfs(rootfs, log)
        record = oci.write_layout(rootfs, directory / "layout", [recipe.ref, recipe.alias], dict(recipe.env),
                                  list(recipe.cmd), user=recipe.user)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    record.update(seconds=round(time.monotonic() - started, 1), layout=str(directory / "layout"))
    (directory / "image.json").write_text(json.dumps(record, indent=2))
    last.write_text(f"{record['seconds']}\n")
    for older in directory.parent.glob(f"{recipe.lineage}-*"):  # earlier builds of this image: gigabytes each
        if older != directory and re.fullmatch(r"[0-9a-f]{16}", older.name[len(recipe.lineage) + 1:]):
            shutil.rmtree(older, ignore_errors=True)
    echo(f"built {recipe.ref} in {record['seconds']:.0f}s ({record['size'] / 2**30:.2f} GiB)")
    return record


def last_build_file(name: str) -> Path:
    """How long the last build of image `name` took (kept beside the images: a build replaces its older ones)."""
    return cache_dir() / "images" / f"{name}.last-build-seconds"


def build_images(names: tuple[str, ...] = NODE_IMAGES, echo: Callable[[str], None] = lambda _: None) -> dict[str, dict]:
    return {name: build_image(RECIPES[name](), echo) for name in names}
