"""A tiny distributed XGBoost job on CPU: rank 0 runs the Rabit tracker at the address the controller names
(DMLC_TRACKER_URI:DMLC_TRACKER_PORT); every worker (DMLC_TASK_ID of DMLC_NUM_WORKER) trains on its shard of a
synthetic regression set. Prints `xgboost ok workers=<N>` and the first and last round's RMSE."""

import os
import threading

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

workers = int(os.environ["DMLC_NUM_WORKER"])
rank = int(os.environ["DMLC_TASK_ID"])
host, port = os.environ["DMLC_TRACKER_URI"], int(os.environ["DMLC_TRACKER_PORT"])

if rank == 0:
    tracker = RabitTracker(n_workers=workers, host_ip="0.0.0.0", port=port)
    tracker.start()
    threading.Thread(target=tracker.wait_for, daemon=True).start()

with collective.CommunicatorContext(dmlc_tracker_uri=host, dmlc_tracker_port=port, dmlc_task_id=str(rank),
                                    dmlc_communicator="rabit", dmlc_retry=20, dmlc_timeout=120):
    if collective.get_world_size() != workers:
        raise SystemExit(f"world size {collective.get_world_size()} != {workers}")
    rng = np.random.default_rng(0)
    features = rng.normal(size=(2000, 8))
    targets = features @ rng.normal(size=8) + 0.01 * rng.normal(size=2000)
    mine = xgb.DMatrix(features[rank::workers], label=targets[rank::workers])
    history: dict = {}
    xgb.train({"objective": "reg:squarederror", "max_depth": 3, "eta": 0.3, "tree_method": "hist"}, mine,
              num_boost_round=20, evals=[(mine, "train")], evals_result=history, verbose_eval=False)
    rmse = history["train"]["rmse"]
    print(f"xgboost ok workers={collective.get_world_size()} rank={collective.get_rank()}", flush=True)
    print(f"first rmse {rmse[0]:.6f} final rmse {rmse[-1]:.6f}", flush=True)
