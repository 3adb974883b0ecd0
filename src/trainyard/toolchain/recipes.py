"""How each pinned tool is built from its Go wrapper module.

A recipe turns a Tool into a list of steps: `go` invocations run inside the
tool's wrapper module (so every module is checked against the committed go.sum)
or small Python actions (copying a file shipped in a pinned module). Version
stamps use the upstream variables each project's own release build sets, so
clients see real versions (v1.36.3, not v0.0.0).
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from trainyard.toolchain.modules import module_dir, module_info
from trainyard.toolchain.versions import Tool


@dataclass(frozen=True)
class GoStep:
    """One `go` command run in the wrapper module."""

    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None

    def describe(self) -> str:
        return "go " + " ".join(self.args)


@dataclass(frozen=True)
class PyStep:
    """A Python action, e.g. copying a script shipped inside a pinned module."""

    description: str
    action: Callable[[], None]

    def describe(self) -> str:
        return self.description


Step = GoStep | PyStep


def _commit_and_date(tool: Tool, module_path: str) -> tuple[str, str]:
    try:
        info = module_info(tool, module_path)
        if "Origin" not in info and info.get("Version"):  # the query form reports the VCS origin
            info = module_info(tool, f"{module_path}@{info['Version']}")
    except (subprocess.CalledProcessError, json.JSONDecodeError):
        return "unknown", "1970-01-01T00:00:00Z"
    commit = (info.get("Origin") or {}).get("Hash", "unknown")
    return commit, info.get("Time", "1970-01-01T00:00:00Z")


def _ldflags(pairs: dict[str, str]) -> str:
    return " ".join(["-s", "-w"] + [f"-X {key}={value}" for key, value in pairs.items()])


def _build(tool: Tool, ldflags: str, out: Path, packages: list[str], extra: tuple[str, ...] = ()) -> GoStep:
    return GoStep(("build", "-trimpath", *extra, "-ldflags", ldflags, "-o", str(out), *packages))


def _kubernetes_stamp(tool: Tool) -> dict[str, str]:
    """The version variables Kubernetes' own release build sets (so `kubectl version` shows v1.36.3)."""
    commit, date = _commit_and_date(tool, "k8s.io/kubernetes")
    major, minor = tool.version.lstrip("v").split(".")[:2]
    stamp: dict[str, str] = {}
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        stamp.update({
            f"{pkg}.gitVersion": tool.version, f"{pkg}.gitMajor": major, f"{pkg}.gitMinor": minor,
            f"{pkg}.gitTreeState": "clean", f"{pkg}.gitCommit": commit, f"{pkg}.buildDate": date,
        })
    return stamp


def kubernetes(tool: Tool) -> list[Step]:
    """All four Kubernetes binaries in one `go build` so shared packages compile once.

    -pgo=off: kube-apiserver ships a PGO profile that would otherwise rebuild every
    dependency separately for it.
    """
    stamp = _kubernetes_stamp(tool)
    packages = [f"k8s.io/kubernetes/cmd/{b}" for b in tool.binaries]

    def index_fields() -> None:
        from trainyard.toolchain.k8s_fields import index_path, write_index

        write_index(module_dir(tool, "k8s.io/kubernetes"), index_path())

    return [_build(tool, _ldflags(stamp), Path(str(tool.bin_dir) + "/"), packages, ("-pgo=off",)),
            PyStep("index the Job and pod fields of the pinned OpenAPI document (trainyard.toolchain.k8s_fields)", index_fields)]


def kube_node(tool: Tool) -> list[Step]:
    """The kubelet and kube-proxy of the same release, for real nodes."""
    packages = [f"k8s.io/kubernetes/cmd/{b}" for b in tool.binaries]
    return [_build(tool, _ldflags(_kubernetes_stamp(tool)), Path(str(tool.bin_dir) + "/"), packages, ("-pgo=off",))]


CONTAINERD_MODULE = "github.com/containerd/containerd/v2"


def containerd(tool: Tool) -> list[Step]:
    """containerd, its runc shim and ctr, without the snapshotters that need C libraries (as upstream's
    static release build)."""
    flags = _ldflags({f"{CONTAINERD_MODULE}/version.Version": tool.version})
    tags = ("-tags", "no_btrfs no_devmapper no_zfs")
    return [_build(tool, flags, tool.bin_dir / b, [f"{CONTAINERD_MODULE}/cmd/{b}"], tags) for b in tool.binaries]


def runc(tool: Tool) -> list[Step]:
    """runc with cgo (libcontainer/nsenter is C) and seccomp (the CRI asks for RuntimeDefault profiles), linked
    statically against Debian's libseccomp as upstream's release binaries are."""
    from trainyard.toolchain.host_packages import RUNC_BUILD_PACKAGES, ensure_host_packages

    flags = _ldflags({"main.version": tool.version.lstrip("v")}) + " -linkmode external -extldflags -static"
    step = _build(tool, flags, tool.bin_dir / "runc", ["github.com/opencontainers/runc"], ("-tags", "seccomp urfave_cli_no_docs"))
    return [PyStep(f"apt-get install {' '.join(RUNC_BUILD_PACKAGES)} if missing",
                   lambda: ensure_host_packages(RUNC_BUILD_PACKAGES)),
            GoStep(step.args, env={"CGO_ENABLED": "1"})]


CNI_PACKAGES = {"bridge": "plugins/main/bridge", "loopback": "plugins/main/loopback",
                "host-local": "plugins/ipam/host-local", "portmap": "plugins/meta/portmap"}


def cni_plugins(tool: Tool) -> list[Step]:
    flags = _ldflags({"github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion": tool.version})
    return [_build(tool, flags, tool.bin_dir / b, [f"github.com/containernetworking/plugins/{CNI_PACKAGES[b]}"])
            for b in tool.binaries]


def coredns(tool: Tool) -> list[Step]:
    commit, _ = _commit_and_date(tool, "github.com/coredns/coredns")
    flags = _ldflags({"github.com/coredns/coredns/coremain.GitCommit": commit[:7]})
    return [_build(tool, flags, tool.bin_dir / "coredns", ["github.com/coredns/coredns"])]


def etcd(tool: Tool) -> list[Step]:
    commit, _ = _commit_and_date(tool, "go.etcd.io/etcd/server/v3")
    flags = _ldflags({"go.etcd.io/etcd/api/v3/version.GitSHA": commit[:12]})
    return [
        _build(tool, flags, tool.bin_dir / "etcd", ["go.etcd.io/etcd/server/v3"]),
        _build(tool, flags, tool.bin_dir / "etcdctl", ["go.etcd.io/etcd/etcdctl/v3"]),
    ]


def kwok(tool: Tool) -> list[Step]:
    flags = _ldflags({"sigs.k8s.io/kwok/pkg/consts.Version": tool.version.lstrip("v")})
    return [
        _build(tool, flags, tool.bin_dir / "kwok", ["sigs.k8s.io/kwok/cmd/kwok"]),
        _build(tool, flags, tool.bin_dir / "kwokctl", ["sigs.k8s.io/kwok/cmd/kwokctl"]),
    ]


def jobset(tool: Tool) -> list[Step]:
    commit, _ = _commit_and_date(tool, "sigs.k8s.io/jobset")
    flags = _ldflags({"sigs.k8s.io/jobset/pkg/version.GitVersion": tool.version,
                      "sigs.k8s.io/jobset/pkg/version.GitCommit": commit})
    return [_build(tool, flags, tool.bin_dir / "jobset", ["sigs.k8s.io/jobset"])]


def volcano(tool: Tool) -> list[Step]:
    commit, date = _commit_and_date(tool, "volcano.sh/volcano")
    flags = _ldflags({"volcano.sh/volcano/pkg/version.Version": tool.version,
                      "volcano.sh/volcano/pkg/version.GitSHA": commit,
                      "volcano.sh/volcano/pkg/version.Built": date})
    commands = {"vc-scheduler": "scheduler", "vc-controller-manager": "controller-manager",
                "vc-webhook-manager": "webhook-manager"}
    return [_build(tool, flags, tool.bin_dir / b, [f"volcano.sh/volcano/cmd/{commands[b]}"]) for b in tool.binaries]


def _prometheus_stamp(tool: Tool, module_path: str, version: str) -> dict[str, str]:
    """The variables of prometheus/common/version that Prometheus' own release build (promu) sets."""
    commit, date = _commit_and_date(tool, module_path)
    pkg = "github.com/prometheus/common/version"
    return {f"{pkg}.Version": version.lstrip("v"), f"{pkg}.Revision": commit, f"{pkg}.Branch": "HEAD",
            f"{pkg}.BuildUser": "trainyard", f"{pkg}.BuildDate": date}


PROMETHEUS_MODULE = "github.com/prometheus/prometheus"


def prometheus(tool: Tool) -> list[Step]:
    flags = _ldflags(_prometheus_stamp(tool, PROMETHEUS_MODULE, tool.version))
    return [_build(tool, flags, tool.bin_dir / name, [f"{PROMETHEUS_MODULE}/cmd/{name}"]) for name in tool.binaries]


def kube_state_metrics(tool: Tool) -> list[Step]:
    module = "k8s.io/kube-state-metrics/v2"
    flags = _ldflags(_prometheus_stamp(tool, module, tool.version))
    return [_build(tool, flags, tool.bin_dir / "kube-state-metrics", [module])]


def copy_from_module(tool: Tool, module_path: str, relative: str, dest: Path, mode: int = 0o755) -> PyStep:
    """Copy a file shipped inside a pinned module (module zips carry no exec bits)."""

    def action() -> None:
        source = module_dir(tool, module_path) / relative
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
        dest.chmod(mode | stat.S_IRUSR)

    return PyStep(f"copy {module_path}/{relative} -> {dest}", action)


TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
FLUX_TEMPLATES = "pkg/runtime/framework/plugins/flux/templates"


TRAINER_BINARIES = {"trainer-controller-manager": f"{TRAINER_MODULE}/cmd/trainer-controller-manager"}


def kubeflow_trainer(tool: Tool) -> list[Step]:
    """Upstream's controller (the oracle trainyard's is compared with) and the Flux policy's templates.

    Upstream's release build sets no version variables, so there is nothing to stamp. The templates
    (`flux/<file>` in the tool's bin dir) are copied from the same pinned module.
    """
    builds: list[Step] = [_build(tool, _ldflags({}), tool.bin_dir / name, [TRAINER_BINARIES[name]])
                          for name in tool.binaries if name in TRAINER_BINARIES]
    copies: list[Step] = [copy_from_module(tool, TRAINER_MODULE, f"{FLUX_TEMPLATES}/{name.removeprefix('flux/')}",
                                           tool.bin_dir / name, mode=0o644)
                          for name in tool.binaries if name.startswith("flux/")]
    return builds + copies


RECIPES: dict[str, Callable[[Tool], list[Step]]] = {
    "kubernetes": kubernetes,
    "etcd": etcd,
    "kwok": kwok,
    "jobset": jobset,
    "volcano": volcano,
    "kubeflow-trainer": kubeflow_trainer,
    "kube-node": kube_node,
    "containerd": containerd,
    "runc": runc,
    "cni-plugins": cni_plugins,
    "coredns": coredns,
    "prometheus": prometheus,
    "kube-state-metrics": kube_state_metrics,
}


def register(name: str, recipe: Callable[[Tool], list[Step]]) -> None:
    RECIPES[name] = recipe


def steps_for(tool: Tool) -> list[Step]:
    if tool.name not in RECIPES:
        raise KeyError(f"no build recipe for {tool.name}")
    return RECIPES[tool.name](tool)
