"""Every benchmark trainyard publishes, rerun by one command (`trainyard bench run NAME`, `make bench`): what each
measures, how it is run and repeated, which figures it yields with their targets, the results file with its
provenance, and the documentation tables generated from those files."""
