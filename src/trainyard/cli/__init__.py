"""The command line (`trainyard ...`): one Typer module per area, assembled in `main.py`.

The top layer: commands parse options, call the library packages below and print. No library package imports
from here. The controller process starts with `python -m trainyard.cli.controller run`, which imports only that
command module and the controller runtime.
"""
