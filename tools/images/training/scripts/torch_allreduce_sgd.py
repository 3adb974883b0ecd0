"""A tiny distributed torch job for real nodes: one gloo all-reduce, then a few DDP SGD steps on synthetic data.

Run under torchrun with the PET_* environment the TrainJob controller injects (rendezvous at PET_MASTER_ADDR,
the JobSet's headless-service name of node 0). Each node's first process prints `allreduce ok world_size=<N>`
once the sum checks out, the loss per step, and `final loss <x>`.

The process group times out after DIST_TIMEOUT_S (90) seconds, not gloo's 30 minutes: a rank that dies then takes
its peers down within that time, and the pods' in-place restarts (JobSet's default `restartPolicy: OnFailure`)
start a fresh rendezvous together, instead of the survivors waiting half an hour in a collective.
"""

import datetime
import os

import torch
import torch.distributed as dist


def main() -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("DIST_TIMEOUT_S", "90")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    speaker = int(os.environ.get("LOCAL_RANK", "0")) == 0

    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    expected = world * (world + 1) / 2
    if total.item() != expected:
        raise SystemExit(f"allreduce wrong: got {total.item()}, expected {expected} (world_size={world})")
    if speaker:
        print(f"allreduce ok world_size={world}", flush=True)

    generator = torch.Generator().manual_seed(0)
    features = torch.randn(512, 8, generator=generator)
    targets = features @ torch.randn(8, 1, generator=generator) + 0.01 * torch.randn(512, 1, generator=generator)
    mine = features[rank::world], targets[rank::world]
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = int(os.environ.get("TRAIN_STEPS", "20"))
    for step in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(mine[0]), mine[1])
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        if speaker:
            print(f"step {step} loss {mean.item():.6f}", flush=True)
    if speaker:
        print(f"final loss {mean.item():.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
