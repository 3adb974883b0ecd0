"""Real nodes: kubelets with a real container runtime, pod network and cluster DNS beside kwok's simulated nodes."""
