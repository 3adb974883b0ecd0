"""Checkpoints a training loop keeps through reclaim, in a few lines (installed in the training image; one file,
standard library plus torch, so it can be copied into any image).

    from trainyard_checkpoint import Checkpointer

    ckpt = Checkpointer(every_steps=50)                  # dir: $TRAINYARD_CHECKPOINT_DIR (default /checkpoints)
    state = ckpt.load()                                  # None on a first run
    start = state["step"] + 1 if state else 0
    if state:
        model.load_state_dict(state["model"]); optimizer.load_state_dict(state["optimizer"])
    for step in range(start, steps):
        ...                                              # one training step
        if ckpt.due(step):                               # every N steps, or when the platform asks
            ckpt.save(step, {"model": model.state_dict(), "optimizer": optimizer.state_dict()})
        if ckpt.stopping:                                # SIGTERM arrived: saved above, so leave now
            raise SystemExit(ckpt.STOPPED)

The protocol (docs/data-scientists.md): the platform asks a TrainJob to save before it suspends it (reclaim), either
through the status server (`GET .../checkpoint-request`, polled by rank 0 at most every `poll_s` seconds) or with
SIGTERM (any suspension; the pod's termination grace period bounds the time left). `due` agrees on it across ranks
(one all-reduce of a flag), so every rank saves at the same step. `save` writes on rank 0 only (DDP replicas are
equal), atomically, then reports the step and time as trainerStatus metrics `trainyard.dev/checkpoint-step` and
`trainyard.dev/checkpoint-time`: reclaim then counts only the work since that time as lost, and suspends the job
as soon as it sees a checkpoint newer than its ask. Without the status server (the TrainJobStatus feature gate
off) checkpoints still work; the platform just cannot see them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import ssl
import time
import urllib.request
from pathlib import Path

STEP_METRIC = "trainyard.dev/checkpoint-step"
TIME_METRIC = "trainyard.dev/checkpoint-time"
ENV_DIR = "TRAINYARD_CHECKPOINT_DIR"
DEFAULT_DIR = "/checkpoints"
ENV_URL, ENV_CA, ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_URL", "KUBEFLOW_TRAINER_SERVER_CA_CERT", "KUBEFLOW_TRAINER_SERVER_TOKEN"
STATUS_SUFFIX = "/status"
CHECKPOINT_FILE = "checkpoint.pt"


def now_rfc3339(epoch: float | None = None, micro: bool = False) -> str:
    moment = dt.datetime.fromtimestamp(time.time() if epoch is None else epoch, dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def status_report(step: int, saved_at: float, progress: int | None = None) -> dict:
    """The status server body that reports a checkpoint (and, optionally, progress in percent)."""
    status: dict = {"metrics": [{"name": STEP_METRIC, "value": str(step)},
                                {"name": TIME_METRIC, "value": now_rfc3339(saved_at, micro=True)}],
                    "lastUpdatedTime": now_rfc3339()}
    if progress is not None:
        status["progressPercentage"] = max(0, min(100, int(progress)))
    return {"trainerStatus": status}


def checkpoint_request_url(status_url: str) -> str:
    """The checkpoint-request endpoint beside a TrainJob's status endpoint (same server, same token)."""
    base, _, rest = status_url.partition("/apis/trainer.kubeflow.org/v1alpha1/")
    path = rest[:-len(STATUS_SUFFIX)] if rest.endswith(STATUS_SUFFIX) else rest
    return f"{base}/trainyard/v1/{path}/checkpoint-request"


class StatusServer:
    """The controller's status server, as the TrainJobStatus plugin describes it in the pod's environment."""

    def __init__(self, env: dict | None = None):
        env = os.environ if env is None else env
        self.url, self.ca, self.token_file = env.get(ENV_URL), env.get(ENV_CA), env.get(ENV_TOKEN)

    @property
    def available(self) -> bool:
        return bool(self.url and self.token_file)

    def _call(self, method: str, url: str, body: dict | None = None) -> dict:
        token = Path(self.token_file or "").read_text().strip()
        request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        context = ssl.create_default_context(cafile=self.ca) if self.ca else None
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return json.loads(response.read() or b"{}")

    def report(self, body: dict) -> None:
        self._call("POST", str(self.url), body)

    def asked(self) -> str | None:
        """When the open ask was made (its `requestedAt`), or None: no ask."""
        answer = self._call("GET", checkpoint_request_url(str(self.url)))
        return str(answer.get("requestedAt") or "asked") if answer.get("requested") else None


def _distributed():
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


class Checkpointer:
    STOPPED = 128 + signal.SIGTERM
    """The exit code after a SIGTERM save: what the signal would have given. Never 0, so a pod stopped for any
    other reason than a suspension (a drain, a preemption) is not taken for a finished one."""

    def __init__(self, directory: str | None = None, every_steps: int | None = None, poll_s: float = 5.0,
                 server: StatusServer | None = None, handle_sigterm: bool = True):
        self.directory = Path(directory or os.environ.get(ENV_DIR) or DEFAULT_DIR)
        self.every_steps, self.poll_s = every_steps, poll_s
        self.server = server if server is not None else StatusServer()
        self.stopping = False
        """SIGTERM arrived (and was agreed on by every rank at the last `due`): save, then leave the loop."""
        self.asked = False
        """The platform asked for a checkpoint (reclaim): `due` answers True once per ask, then the job goes on until
        the platform suspends it (or withdraws the ask: a later ask is answered again)."""
        self._signalled = False
        self._polled_at = 0.0
        self._answered: str | None = None  # the ask the last save answered
        if handle_sigterm:
            signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum, frame) -> None:
        self._signalled = True

    @property
    def rank(self) -> int:
        dist = _distributed()
        return dist.get_rank() if dist else int(os.environ.get("RANK", "0"))

    def _poll(self) -> bool:
        """Rank 0, at most every `poll_s`: whether an ask not answered yet is open."""
        if self.rank != 0 or not self.server.available or time.monotonic() - self._polled_at < self.poll_s:
            return False
        self._polled_at = time.monotonic()
        try:
            ask = self.server.asked()
        except (OSError, ValueError) as exc:
            print(f"trainyard_checkpoint: checkpoint request not read: {exc}", flush=True)
            return False
        if ask is None or ask == self._answered:
            return False
        self._answered = ask
        return True

    def due(self, step: int) -> bool:
        """Whether to save after `step`: every `every_steps`, when asked, or on SIGTERM; the same on every rank."""
        flags = [self._signalled, self._poll()]
        dist = _distributed()
        if dist is not None:
            import torch

            agreed = torch.tensor([float(f) for f in flags])
            dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
            flags = [bool(v) for v in agreed.tolist()]
        signalled, asked = flags  # `asked`: a new ask (rank 0 saw it, every rank agrees)
        self.stopping = self.stopping or signalled
        self.asked = self.asked or asked
        periodic = bool(self.every_steps) and (step + 1) % int(self.every_steps or 1) == 0
        return periodic or signalled or asked

    def save(self, step: int, state: dict, progress: int | None = None) -> None:
        """Write `state` with its step (rank 0, atomically), report it, and wait for every rank."""
        if self.rank == 0:
            import torch

            self.directory.mkdir(parents=True, exist_ok=True)
            partial = self.directory / f".{CHECKPOINT_FILE}.partial"
            torch.save({**state, "step": step}, partial)
            os.replace(partial, self.directory / CHECKPOINT_FILE)
            print(f"checkpoint saved at step {step}", flush=True)
            if self.server.available:
                try:
                    self.server.report(status_report(step, time.time(), progress))
                except (OSError, ValueError) as exc:
                    print(f"trainyard_checkpoint: checkpoint not reported: {exc}", flush=True)
        dist = _distributed()
        if dist is not None:
            dist.barrier()

    def load(self) -> dict | None:
        """The last checkpoint's state (with its "step"), or None when there is none yet."""
        path = self.directory / CHECKPOINT_FILE
        if not path.exists():
            return None
        import torch

        state = torch.load(path, weights_only=False)
        print(f"resuming from the checkpoint of step {state['step']}", flush=True)
        return state
