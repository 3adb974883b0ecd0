"""PlainML policy: a runtime without torch, MPI or JAX (so also next to XGBoost) gets numNodes and the trainer env."""

from __future__ import annotations

from ..info import RuntimeInfo
from .common import set_trainer_count_from_num_nodes, upsert_trainer_env
from .framework import Context


def enforce_ml_policy(info: RuntimeInfo, ctx: Context) -> None:
    ml = info.ml_policy or {}
    if any(k in ml for k in ("torch", "mpi", "jax")):
        return
    set_trainer_count_from_num_nodes(info)
    upsert_trainer_env(info)
