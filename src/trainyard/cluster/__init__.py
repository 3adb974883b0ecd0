"""The local cluster: kwokctl's binary runtime, simulated GPU nodes, local controller processes."""
