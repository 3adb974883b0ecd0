"""PlainML, JAX and XGBoost ML policies (env + numNodes only)."""

from __future__ import annotations

from .. import constants as C
from .. import k8s
from ..info import RuntimeInfo
from ..resources import gpu_count
from .common import master_host, resources_per_node, set_trainer_count_from_num_nodes, trainer_count, upsert_trainer_env


def enforce_plainml(info: RuntimeInfo) -> None:
    """Runs when none of torch/mpi/jax is set (so also next to xgboost): numNodes + trainer env."""
    ml = info.ml_policy or {}
    if any(k in ml for k in ("torch", "mpi", "jax")):
        return
    set_trainer_count_from_num_nodes(info)
    upsert_trainer_env(info)


def _node_container_with_num_nodes(info: RuntimeInfo) -> dict | None:
    """Apply spec.trainer.numNodes, then the trainer job's `node` container (None: nothing to inject)."""
    set_trainer_count_from_num_nodes(info)
    if info.trainer is None:
        return None
    return info.trainer_node_container()


def enforce_jax(info: RuntimeInfo) -> None:
    if "jax" not in (info.ml_policy or {}):
        return
    container = _node_container_with_num_nodes(info)
    if container is None:
        return
    k8s.upsert_env(container, [
        k8s.env_value("JAX_NUM_PROCESSES", str(trainer_count(info))),
        k8s.env_field_ref("JAX_PROCESS_ID", C.JOB_COMPLETION_INDEX_FIELD),
        k8s.env_value("JAX_COORDINATOR_ADDRESS", f"{master_host(info)}:{C.CONTAINER_TRAINER_PORT}"),
    ])
    k8s.upsert_port(container, C.CONTAINER_TRAINER_PORT)


def enforce_xgboost(info: RuntimeInfo) -> None:
    if "xgboost" not in (info.ml_policy or {}) or info.pod_set_by_ancestor(C.ANCESTOR_TRAINER) is None:
        return
    container = _node_container_with_num_nodes(info)
    if container is None:
        return
    workers = trainer_count(info) * max(1, gpu_count(resources_per_node(info)))
    k8s.upsert_env(container, [
        k8s.env_value("DMLC_TRACKER_URI", master_host(info)),
        k8s.env_value("DMLC_TRACKER_PORT", str(C.CONTAINER_TRAINER_PORT)),
        k8s.env_field_ref("DMLC_TASK_ID", C.JOB_COMPLETION_INDEX_FIELD),
        k8s.env_value("DMLC_NUM_WORKER", str(workers)),
    ])
    k8s.upsert_port(container, C.CONTAINER_TRAINER_PORT)
