"""torch over MPI-launched processes: `mpirun` (OpenMPI) or `mpiexec.hydra` (MPICH), the launcher, over the SSH
keys and hostfile the controller generates, starts one process per slot on the worker nodes; each joins a gloo group whose master is MASTER_ADDR
(the launcher forwards the hostfile's first host with `-x`; the hostfile exists on the launcher only), and the
ranks all-reduce. Every rank prints `mpi allreduce ok world_size=<N> rank=<R>
host=<pod>` once the sum checks out."""

import os
import socket

import torch
import torch.distributed as dist

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ["PMI_RANK"])  # OpenMPI's mpirun, or MPICH's Hydra
world = int(os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ["PMI_SIZE"])
master = os.environ["MASTER_ADDR"]
dist.init_process_group("gloo", init_method=f"tcp://{master}:29500", rank=rank, world_size=world)
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
if total.item() != world * (world + 1) / 2:
    raise SystemExit(f"allreduce wrong: {total.item()}")
print(f"mpi allreduce ok world_size={world} rank={rank} host={socket.gethostname()}", flush=True)
dist.destroy_process_group()
