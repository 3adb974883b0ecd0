"""XGBoost policy: the DMLC_* tracker env (one worker per GPU, at least one per node); those names are reserved."""

from __future__ import annotations

from .. import constants as C
from .. import k8s
from ..info import RuntimeInfo
from ..schema import FieldError
from ..validation import forbidden, ml_policy
from .common import master_host, node_container_with_num_nodes, node_gpus, trainer_count
from .framework import Context


def validate(trainjob: dict, runtime: dict, old: dict | None) -> list[FieldError]:
    if "xgboost" not in ml_policy(runtime):
        return []
    trainer = trainjob["spec"].get("trainer") or {}
    return [forbidden(f"spec.trainer.env[{i}]", f"{env['name']} is reserved for the XGBoost runtime")
            for i, env in enumerate(trainer.get("env") or []) if env.get("name") in C.XGBOOST_RESERVED_ENVS]


def enforce_ml_policy(info: RuntimeInfo, ctx: Context) -> None:
    if "xgboost" not in (info.ml_policy or {}) or info.pod_set_by_ancestor(C.ANCESTOR_TRAINER) is None:
        return
    container = node_container_with_num_nodes(info)
    if container is None:
        return
    workers = trainer_count(info) * max(1, node_gpus(info))
    k8s.upsert_env(container, [
        k8s.env_value("DMLC_TRACKER_URI", master_host(info)),
        k8s.env_value("DMLC_TRACKER_PORT", str(C.CONTAINER_TRAINER_PORT)),
        k8s.env_field_ref("DMLC_TASK_ID", C.JOB_COMPLETION_INDEX_FIELD),
        k8s.env_value("DMLC_NUM_WORKER", str(workers)),
    ])
    k8s.upsert_port(container, C.CONTAINER_TRAINER_PORT)
