"""Capacity of a live platform: what is free where (`report`), and whether one TrainJob would run now (`fit`).

`model.py`, `fit.py` and `report.py` are pure functions over listed objects (plain dicts); `live.py` lists
them from the API server; `commands.py` adds `trainyard report` and `trainyard fit` to the CLI.
"""
