"""MPI ML policy: SSH key Secret, hostfile ConfigMap, launcher env, slots, runLauncherAsNode.

Implementations: OpenMPI (upstream: `OMPI_MCA_*` env, hostfile `<host> slots=<n>`), and beyond upstream
Intel MPI (`I_MPI_HYDRA_HOST_FILE`, `I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS`) and MPICH
(`HYDRA_HOST_FILE`, `HYDRA_LAUNCH_EXTRA_ARGS`), both with hostfile lines `<host>:<n>` (as mpi-operator).
"""

from __future__ import annotations

import base64

from .. import constants as C
from trainyard import k8s as K
from .. import k8s
from ..errors import ValidationError
from ..info import RuntimeInfo
from ..schema import FieldError
from ..validation import invalid, ml_policy, reserved_env_errors, runtime_jobs
from .common import node_gpus
from .framework import Context, ObjectRef

HOSTFILE_PATH = f"{C.MPI_HOSTFILE_DIR}/{C.MPI_HOSTFILE_NAME}"


def generate_ssh_key() -> tuple[bytes, bytes]:
    """A fresh ECDSA P-521 key: (PEM 'EC PRIVATE KEY', authorized_keys line)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public + b"\n"


def implementation(mpi: dict) -> str:
    """The MPI flavour; an empty value (allowed by the CRD enum) means the default, OpenMPI."""
    return mpi.get("mpiImplementation") or C.MPI_OPENMPI


def _launcher_env(impl: str, slots: int) -> list[dict]:
    if impl == C.MPI_INTEL:
        return [k8s.env_value(C.INTEL_ENV_HOSTFILE, HOSTFILE_PATH),
                k8s.env_value(C.INTEL_ENV_BOOTSTRAP_ARGS, C.MPI_RSH_ARGS)]
    if impl == C.MPI_MPICH:
        return [k8s.env_value(C.MPICH_ENV_HOSTFILE, HOSTFILE_PATH),
                k8s.env_value(C.MPICH_ENV_LAUNCH_ARGS, C.MPI_RSH_ARGS)]
    if impl == C.MPI_OPENMPI:
        # PRTE must not keep FQDNs: the hostfile's short pod names never match what PRTE resolves for itself, and
        # with the launcher as a node it would ssh to itself (kubeflow/trainer#4029)
        return [k8s.env_value(C.OMPI_ENV_HOSTFILE, HOSTFILE_PATH),
                k8s.env_value(C.OMPI_ENV_KEEP_FQDN, "true"),
                k8s.env_value(C.OMPI_ENV_DEFAULT_SLOTS, str(slots)),
                k8s.env_value(C.OMPI_ENV_RSH_ARGS, C.MPI_RSH_ARGS),
                k8s.env_value(C.PRTE_ENV_HOSTFILE, HOSTFILE_PATH),
                k8s.env_value(C.PRTE_ENV_KEEP_FQDN, "false"),
                k8s.env_value(C.PRTE_ENV_DEFAULT_SLOTS, str(slots)),
                k8s.env_value(C.PRTE_ENV_SSH_ARGS, C.MPI_RSH_ARGS)]
    raise ValidationError(f"MPI implementation {impl!r} is not supported; use OpenMPI, Intel or MPICH",
                          "spec.mlPolicy.mpi.mpiImplementation")


def _hostfile_line(impl: str, host: str, slots: int) -> str:
    return f"{host} slots={slots}" if impl == C.MPI_OPENMPI else f"{host}:{slots}"


def _ssh_volume(info: RuntimeInfo) -> dict:
    return {"name": C.MPI_SSH_VOLUME, "secret": {
        "secretName": info.name + C.MPI_SSH_SECRET_SUFFIX,
        "defaultMode": 0o400,
        "items": [
            {"key": C.MPI_SSH_PRIVATE_KEY, "path": "id_rsa", "mode": 0o640},
            {"key": C.MPI_SSH_PUBLIC_KEY, "path": "id_rsa.pub", "mode": 0o644},
            {"key": C.MPI_SSH_PUBLIC_KEY, "path": "authorized_keys", "mode": 0o644},
        ]}}


def _hostfile_volume(info: RuntimeInfo) -> dict:
    return {"name": C.MPI_HOSTFILE_VOLUME, "configMap": {
        "name": info.name + C.MPI_HOSTFILE_SUFFIX,
        "items": [{"key": C.MPI_HOSTFILE_NAME, "path": C.MPI_HOSTFILE_NAME, "mode": 0o444}]}}


def slots(info: RuntimeInfo) -> int:
    """trainer.numProcPerNode, else the runtime's; a 1 becomes the GPU count when that is larger."""
    mpi = (info.ml_policy or {})["mpi"]
    requested = (info.trainer or {}).get("numProcPerNode")
    if requested is not None:
        if isinstance(requested, str) and not requested.isdigit():
            raise ValidationError(f"must be an integer for MPI runtimes, got {requested!r}",
                                  "spec.trainer.numProcPerNode")
        return int(requested)
    value = mpi.get("numProcPerNode", 1)
    if value == 1:
        gpus = node_gpus(info)
        if gpus > 1:
            return gpus
    return value


def validate(trainjob: dict, runtime: dict, old: dict | None) -> list[FieldError]:
    """Upstream's MPI admission (launcher-as-node needs both jobs, reserved env) plus an integer numProcPerNode."""
    ml = ml_policy(runtime)
    if "mpi" not in ml:
        return []
    mpi = ml["mpi"]
    trainer = trainjob["spec"].get("trainer") or {}
    errors: list[FieldError] = []
    names = {j.get("name") for j in runtime_jobs(runtime)}
    if mpi.get("runLauncherAsNode") and (trainer.get("numNodes") or 0) >= 2 and not {C.LAUNCHER, C.NODE} <= names:
        errors.append(invalid("spec.trainer.numNodes", trainer.get("numNodes"),
                              "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node"))
    errors += reserved_env_errors(trainer, C.MPI_RESERVED_ENVS)
    nproc = trainer.get("numProcPerNode")
    if isinstance(nproc, str) and not nproc.isdigit():
        errors.append(invalid("spec.trainer.numProcPerNode", nproc, "must be an integer for MPI runtimes"))
    return errors


def enforce_ml_policy(info: RuntimeInfo, ctx: Context) -> None:
    mpi = (info.ml_policy or {}).get("mpi")
    if mpi is None:
        return
    impl = implementation(mpi)
    num_nodes = (info.trainer or {}).get("numNodes")
    node = info.pod_set(C.NODE)
    if num_nodes is not None and node is not None:
        node.count = max(num_nodes - 1, 1) if mpi.get("runLauncherAsNode") else num_nodes
    info.mpi_slots = slots(info)
    launcher_env = _launcher_env(impl, info.mpi_slots)  # validates the implementation
    for job in k8s.replicated_jobs(info.spec):
        if job.get("name") not in (C.NODE, C.LAUNCHER):
            continue
        pod = k8s.pod_spec(job)
        k8s.upsert_volumes(pod, [_ssh_volume(info)])
        is_launcher = job["name"] == C.LAUNCHER
        if is_launcher:
            k8s.upsert_volumes(pod, [_hostfile_volume(info)])
        container = k8s.find_container(job, C.NODE)
        if container is None:
            continue
        k8s.upsert_volume_mounts(container, [{"name": C.MPI_SSH_VOLUME, "mountPath": mpi.get("sshAuthMountPath", "/root/.ssh")}])
        if is_launcher:
            k8s.upsert_volume_mounts(container, [{"name": C.MPI_HOSTFILE_VOLUME, "mountPath": C.MPI_HOSTFILE_DIR}])
            k8s.upsert_env(container, launcher_env)


def build(info: RuntimeInfo, ctx: Context) -> None:
    """Secret (only when absent: it is immutable and pods already mount it) + hostfile ConfigMap."""
    mpi = (info.ml_policy or {}).get("mpi")
    if mpi is None:
        return
    secret_name = info.name + C.MPI_SSH_SECRET_SUFFIX
    namespace = k8s.namespace_of(info.trainjob)
    if k8s.find_object(info.existing, "Secret", secret_name, namespace) is None:
        private, public = (ctx.key_generator or generate_ssh_key)()
        info.secrets.append({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": k8s.object_meta(secret_name, info.trainjob),
            "type": "kubernetes.io/ssh-auth",
            "immutable": True,
            "data": {C.MPI_SSH_PRIVATE_KEY: base64.b64encode(private).decode(),
                     C.MPI_SSH_PUBLIC_KEY: base64.b64encode(public).decode()},
        })
    impl = implementation(mpi)
    launcher_as_node = bool(mpi.get("runLauncherAsNode"))
    lines = []
    for pod_set in info.pod_sets:
        if pod_set.name == C.NODE or (launcher_as_node and pod_set.name == C.LAUNCHER):
            lines += [_hostfile_line(impl, host, info.mpi_slots) for host in ctx.endpoints.get(pod_set.name, [])]
    info.config_maps.append({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": k8s.object_meta(info.name + C.MPI_HOSTFILE_SUFFIX, info.trainjob),
        "data": {C.MPI_HOSTFILE_NAME: "".join(line + "\n" for line in lines)},
    })


def owned_objects(trainjob: dict, runtime: dict) -> list[ObjectRef]:
    """The SSH Secret: immutable and mounted by running pods, so it is created once and kept."""
    if "mpi" not in K.mapping(K.mapping(K.mapping(runtime).get("spec")).get("mlPolicy")):
        return []
    return [ObjectRef("v1", "Secret", k8s.name_of(trainjob) + C.MPI_SSH_SECRET_SUFFIX)]
