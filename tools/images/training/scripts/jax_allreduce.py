"""A tiny multi-process JAX job on CPU: every process joins the coordinator the controller names
(JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID), then the processes all-gather their ids over gloo.
Prints `jax ok processes=<N> sum=<S>` on every process once the gathered sum checks out."""

import os

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
                           num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
                           process_id=int(os.environ["JAX_PROCESS_ID"]))

from jax.experimental import multihost_utils  # noqa: E402 (needs the initialized runtime)
import jax.numpy as jnp  # noqa: E402

count = jax.process_count()
gathered = multihost_utils.process_allgather(jnp.array([jax.process_index() + 1.0]))
total = float(gathered.sum())
expected = count * (count + 1) / 2
if total != expected:
    raise SystemExit(f"jax all-gather wrong: {total} != {expected}")
print(f"jax ok processes={count} sum={total:.0f}", flush=True)
jax.distributed.shutdown()
