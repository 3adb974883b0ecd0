"""Volcano scheduling: the scheduler configuration, queues and HyperNodes, rendered from stack config."""
