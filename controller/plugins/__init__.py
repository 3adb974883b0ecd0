"""Plugins, run in upstream's phase order by `build.py`:
EnforceMLPolicy (torch | mpi | plainml + jax | xgboost) -> EnforcePodGroupPolicy (coscheduling, volcano)
-> PreBuildSync (jobset) -> component builders (jobset, coscheduling, volcano, mpi).
Each module exposes small functions taking the `RuntimeInfo`."""
