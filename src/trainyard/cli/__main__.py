"""`python -m trainyard.cli ...`: the same as the `trainyard` console script."""

from trainyard.cli.main import main

main()
