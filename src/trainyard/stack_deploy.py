"""Deploy, preview and destroy a stack with the pinned Pulumi CLI, as plain functions.

The CLI commands (`trainyard platform ...`, `trainyard up`) and tests call these; nothing here knows
about Typer. A stack whose controllers run locally (`trainyard:controllersRunLocally: true`, the
`local` stack) is bound to one local cluster: its kubeconfig, context and webhook address come from
that cluster, its Pulumi state lives in the cluster's directory (gone with `trainyard down`), and the
stack file in stacks/ is never rewritten.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import yaml

from trainyard import yaml_input
from trainyard.cluster.spec import ClusterSpec, kube_context
from trainyard.errors import TrainyardError
from trainyard.paths import repo_root
from trainyard.platform.stack_config import NAMESPACE, parse_stack_config, stack_values
from trainyard.timestamps import utc_now

DEFAULT_CLUSTER = ClusterSpec.name
LOCAL_STACK = "local"
"""The stack `trainyard up` deploys and the `platform` commands default to."""
PULUMI_PARALLEL = 128
"""Resource operations in flight (`--parallel`). Pulumi's default, 4 per core, is 8 here: each registration waits
on the engine, provider and API server in turn, and a no-op preview of 100 tenants (2,950 resources,
bench/scale.py) left the 2 cores 40 % idle. Measured: 8 -> 96 s, 32 -> 82 s, 64 -> 63 s, 128 -> 55 s."""
PULUMI_PASSES = {"up": ("up", "--yes", "--non-interactive", "--skip-preview", f"--parallel={PULUMI_PARALLEL}"),
                 "refresh": ("refresh", "--yes", "--non-interactive", "--skip-preview", f"--parallel={PULUMI_PARALLEL}"),
                 "preview": ("preview", "--non-interactive", f"--parallel={PULUMI_PARALLEL}"),
                 "destroy": ("destroy", "--yes", "--non-interactive", "--skip-preview", f"--parallel={PULUMI_PARALLEL}")}
ADOPTABLE_TYPES = ("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
                   "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration",
                   "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration")
"""The kinds a stack may adopt (`adoptExistingObjects`: the local cluster applies CRDs and webhook registrations
before the stack exists); the refresh after `up` reads back those the up created or changed."""


class StackError(TrainyardError, RuntimeError):
    """A stack cannot be run; the message says why and what to do."""


def stack_file(stack: str, root: Path | None = None) -> Path:
    return (root or repo_root()) / "stacks" / f"Pulumi.{stack}.yaml"


def known_stacks(root: Path | None = None) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in ((root or repo_root()) / "stacks").glob("Pulumi.*.yaml"))


def missing_stack_message(stack: str, root: Path | None = None) -> str:
    return f"no stack file {stack_file(stack, root)}; known stacks: {', '.join(known_stacks(root)) or 'none'}"


def read_stack_file(stack: str, root: Path | None = None) -> dict:
    path = stack_file(stack, root)
    if not path.is_file():
        raise StackError(missing_stack_message(stack, root))
    try:
        document = yaml_input.load(yaml_input.read_text(path), str(path)) or {}
    except yaml_input.YamlInputError as err:
        raise StackError(str(err)) from None
    if not isinstance(document, dict):
        raise StackError(f"{path}: a stack file is a YAML mapping with a `config:` key")
    return document


def stack_kubeconfig(stack: str, root: Path | None = None) -> str:
    """The kubeconfig file the stack deploys with (`trainyard:kubeconfig`, `~` expanded)."""
    value = ((read_stack_file(stack, root).get("config") or {}).get(f"{NAMESPACE}:kubeconfig"))
    if not isinstance(value, str) or not value:
        raise StackError(f"stack {stack!r} names no cluster: set `{NAMESPACE}:kubeconfig` in {stack_file(stack, root)} "
                         "or pass --kubeconfig FILE")
    return str(Path(value).expanduser())


def runs_controllers_locally(document: dict) -> bool:
    """`trainyard:controllersRunLocally` as the platform program reads it (a bad value is validation's to report)."""
    config, _ = parse_stack_config(stack_values(document), file="stack")
    return config.controllers_run_locally


def bind_to_local_cluster(document: dict, cluster_state: dict, certs_dir: Path) -> dict:
    """The stack document with every value that names a local cluster taken from `cluster_state`.

    Pure: the kubeconfig, its context, the controller webhook's URL and CA bundle are what differ
    between two local clusters (name, ports); everything else is the reviewed stack file.
    """
    bound = yaml.safe_load(yaml.safe_dump(document))  # deep copy of plain YAML data
    config = bound.setdefault("config", {})
    name = cluster_state["name"]
    config[f"{NAMESPACE}:kubeconfig"] = cluster_state["kubeconfig"]
    config[f"{NAMESPACE}:kubeContext"] = kube_context(name)
    controller = dict(config.get(f"{NAMESPACE}:controller") or {})
    webhook = dict(controller.get("webhook") or {})
    webhook["url"] = f"https://127.0.0.1:{cluster_state['ports']['controller_webhook']}"
    webhook["caBundleFile"] = str(certs_dir / "ca.crt")
    controller["webhook"] = webhook
    config[f"{NAMESPACE}:controller"] = controller
    return bound


@dataclass(frozen=True)
class StackTarget:
    """Where one stack runs: its name, the config file Pulumi reads and the state backend it uses."""

    stack: str
    config_file: Path
    backend_dir: Path | None  # the local stack's state directory; None: the user's own backend

    def env(self) -> dict[str, str]:
        from trainyard.pulumi_env import offline_env, shared_env

        return offline_env(backend_dir=self.backend_dir) if self.backend_dir else shared_env()

    def pulumi_args(self, command: str, extra: Sequence[str] = ()) -> list[str]:
        return [*PULUMI_PASSES[command], "--stack", self.stack, "--config-file", str(self.config_file), *extra]


def resolve_target(stack: str, cluster: str = DEFAULT_CLUSTER) -> StackTarget:
    """The target of `stack`; a local-controllers stack is bound to the running local cluster `cluster`."""
    document = read_stack_file(stack)
    if not runs_controllers_locally(document):
        from trainyard.pulumi_env import shared_env, user_backend

        if not user_backend(shared_env()):
            raise StackError(
                f"stack {stack!r} is a shared environment and no Pulumi backend is configured; its state must "
                "live where the team shares it: `pulumi login s3://<bucket>/trainyard` (or azblob://, gs://, "
                "https://api.pulumi.com) or export PULUMI_BACKEND_URL; for a try on this machine only: "
                "export PULUMI_BACKEND_URL=file://$HOME/.pulumi-state (set PULUMI_CONFIG_PASSPHRASE or a "
                "`secretsprovider:` for its secrets)")
        return StackTarget(stack, stack_file(stack), None)
    return local_target(stack, document, cluster)


def local_target(stack: str, document: dict, cluster: str = DEFAULT_CLUSTER) -> StackTarget:
    """The target of a local-controllers stack `document` (a file's, or one a bench generated) bound to the running
    local cluster `cluster`; its state lives in the cluster's directory."""
    from trainyard.cluster import local

    state = local.read_state(cluster)
    if not state:
        raise StackError(f"stack {stack!r} deploys onto a local cluster, and cluster {cluster!r} is not running; "
                         f"start it with `trainyard cluster up --name {cluster}` (or run `trainyard up`)")
    paths = local.ClusterPaths.for_name(cluster)
    bound_file = paths.root / "pulumi" / f"Pulumi.{stack}.yaml"
    bound_file.parent.mkdir(parents=True, exist_ok=True)
    bound_file.write_text(yaml.safe_dump(bind_to_local_cluster(document, state, paths.certs), sort_keys=False))
    return StackTarget(stack, bound_file, paths.root / "pulumi" / "state")


def _pulumi(target: StackTarget, args: Sequence[str], capture: bool = False) -> subprocess.CompletedProcess:
    from trainyard.pulumi_env import run_pulumi

    return run_pulumi(*args, env=target.env(), check=False, capture=capture)


def _select(target: StackTarget) -> None:
    """Select the stack, creating its state the first time (with the stack file's own encryption salt)."""
    if _pulumi(target, ["stack", "select", target.stack], capture=True).returncode == 0:
        return
    created = _pulumi(target, ["stack", "init", target.stack], capture=True)
    if created.returncode != 0:
        raise StackError(f"pulumi stack init {target.stack} failed: {(created.stderr or created.stdout).strip()}")


def run(stack: str, command: str, extra: Sequence[str] = (), cluster: str = DEFAULT_CLUSTER) -> None:
    """`pulumi <command>` of the stack, offline; raises StackError naming the stack on failure."""
    run_target(resolve_target(stack, cluster), command, extra)


def run_target(target: StackTarget, command: str, extra: Sequence[str] = (), log: Path | None = None) -> None:
    """`pulumi <command>` of a resolved target, its output to the terminal or appended to `log`; raises
    StackError naming the stack on failure."""
    from trainyard.pulumi_env import install_plugins
    from trainyard.toolchain.build import ensure_built

    ensure_built("pulumi", "pulumi-kubernetes", "pulumi-policy-analyzer")
    stack = target.stack
    if target.backend_dir:
        install_plugins()
    _select(target)
    result = _pulumi(target, target.pulumi_args(command, extra), capture=log is not None)
    if log is not None:
        with log.open("a") as handle:
            handle.write(f"$ pulumi {' '.join(target.pulumi_args(command, extra))}\n{result.stdout}{result.stderr}\n")
    if result.returncode != 0:
        where = f"its output is in {log}" if log is not None else "its output is above"
        raise StackError(f"pulumi {command} of stack {stack!r} failed (exit {result.returncode}); {where}")


def up(stack: str, extra: Sequence[str] = (), cluster: str = DEFAULT_CLUSTER) -> None:
    """`pulumi up`, then a refresh of the adoptable objects it created or changed."""
    target = resolve_target(stack, cluster)
    started = utc_now()
    run_target(target, "up", extra)
    refresh_adopted(target, started)


def refresh_adopted(target: StackTarget, since: dt.datetime, log: Path | None = None) -> None:
    """`pulumi refresh` of the adoptable objects the state shows created or changed since `since`.

    The refresh records the live state of objects the stack adopted (the local cluster pre-applies CRDs and webhook
    registrations); without it the provider's state of a few adopted CRDs lacks the annotations it applied, and the
    next preview shows a spurious update. Nothing else is read back: a refresh of every resource took longer than
    the up itself at 100 tenants (125 s, bench/scale.py), and a change that touches no adoptable object (a tenant's)
    needs none.
    """
    urns = adopted_urns(stack_resources(target), since)
    if urns:
        run_target(target, "refresh", [f"--target={urn}" for urn in urns], log=log)


def adopted_urns(resources: list[dict], since: dt.datetime) -> list[str]:
    """URNs of the resources (a `pulumi stack export`'s deployment.resources) of an adoptable kind whose state
    was created or modified at or after `since`."""
    return [resource["urn"] for resource in resources
            if resource.get("type") in ADOPTABLE_TYPES and not resource.get("delete")
            and _state_time(resource.get("modified") or resource.get("created")) >= since]


def _state_time(text: str | None) -> dt.datetime:
    """A state timestamp (RFC 3339, nanoseconds); the epoch when absent (states written before Pulumi kept one)."""
    return dt.datetime.fromisoformat(text) if text else dt.datetime.fromtimestamp(0, dt.timezone.utc)


def stack_resources(target: StackTarget) -> list[dict]:
    """The resources of the target's state (`pulumi stack export`)."""
    _select(target)
    exported = _pulumi(target, ["stack", "export", "--stack", target.stack], capture=True)
    if exported.returncode != 0:
        raise StackError(f"pulumi stack export {target.stack} failed: {(exported.stderr or exported.stdout).strip()}")
    return json.loads(exported.stdout)["deployment"].get("resources") or []


def validate(stack: str, echo: Callable[[str], None] = print, root: Path | None = None) -> int:
    """Print every problem of stacks/Pulumi.<stack>.yaml (file:line, field, fix), offline; 1 on errors."""
    from trainyard.platform.problems import errors_of, warnings_of
    from trainyard.platform.stack_validation import check_stack_file

    path = stack_file(stack, root)
    if not path.is_file():
        echo(f"error: {missing_stack_message(stack, root)}")
        return 1
    problems = check_stack_file(path, f"stacks/{path.name}")
    for problem in problems:
        echo(("error: " if problem.severity != "warning" else "") + str(problem))
    errors, warnings = errors_of(problems), warnings_of(problems)
    echo(f"stacks/{path.name}: {len(errors)} error(s), {len(warnings)} warning(s)" if problems
         else f"stacks/{path.name}: OK (no problems)")
    return 1 if errors else 0
