"""A distributed torch job that keeps its work through reclaim (`trainyard_checkpoint`): DDP SGD on synthetic data,
a checkpoint every CHECKPOINT_EVERY steps and whenever the platform asks, STEP_SECONDS of sleep per step so it runs
long enough to be interrupted.

Rank 0 prints `step <n> loss <x>` per step, `checkpoint saved at step <n>`, `resuming from the checkpoint of step
<n>` after a resume, and `final loss <x>`: every step's data and update are fixed by the seed, so a run resumed from
a checkpoint ends with the same loss as one never interrupted.
"""

import datetime
import os
import time

import torch
import torch.distributed as dist
from trainyard_checkpoint import Checkpointer


def main() -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("DIST_TIMEOUT_S", "90"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    speaker = rank == 0
    generator = torch.Generator().manual_seed(int(os.environ.get("SEED", "0")))
    features = torch.randn(512, 8, generator=generator)
    targets = features @ torch.randn(8, 1, generator=generator) + 0.01 * torch.randn(512, 1, generator=generator)
    mine = features[rank::world], targets[rank::world]
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps, pause = int(os.environ.get("TRAIN_STEPS", "60")), float(os.environ.get("STEP_SECONDS", "1"))

    ckpt = Checkpointer(every_steps=int(os.environ.get("CHECKPOINT_EVERY", "10")), poll_s=1.0)
    state = ckpt.load()
    start = state["step"] + 1 if state else 0
    if state:
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    for step in range(start, steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(mine[0]), mine[1])
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        if speaker:
            print(f"step {step} loss {mean.item():.6f}", flush=True)
        if ckpt.due(step):
            ckpt.save(step, {"model": model.module.state_dict(), "optimizer": optimizer.state_dict()},
                      progress=100 * (step + 1) // steps)
        if ckpt.stopping:
            raise SystemExit(ckpt.STOPPED)
        time.sleep(pause)
    if speaker:
        print(f"final loss {mean.item():.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
