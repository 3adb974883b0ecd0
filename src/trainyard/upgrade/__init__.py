"""Upgrading trainyard with work running: what the new version does to the TrainJobs in the cluster."""
