"""JAX policy: JAX_NUM_PROCESSES / JAX_PROCESS_ID / JAX_COORDINATOR_ADDRESS on the trainer `node` container."""

from __future__ import annotations

from .. import constants as C
from .. import k8s
from ..info import RuntimeInfo
from .common import master_host, node_container_with_num_nodes, trainer_count
from .framework import Context


def enforce_ml_policy(info: RuntimeInfo, ctx: Context) -> None:
    if "jax" not in (info.ml_policy or {}):
        return
    container = node_container_with_num_nodes(info)
    if container is None:
        return
    k8s.upsert_env(container, [
        k8s.env_value("JAX_NUM_PROCESSES", str(trainer_count(info))),
        k8s.env_field_ref("JAX_PROCESS_ID", C.JOB_COMPLETION_INDEX_FIELD),
        k8s.env_value("JAX_COORDINATOR_ADDRESS", f"{master_host(info)}:{C.CONTAINER_TRAINER_PORT}"),
    ])
    k8s.upsert_port(container, C.CONTAINER_TRAINER_PORT)
