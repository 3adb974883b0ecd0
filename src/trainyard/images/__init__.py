"""Container images built on this machine from pinned inputs, for real nodes (no registry: imported into each
node's containerd)."""
