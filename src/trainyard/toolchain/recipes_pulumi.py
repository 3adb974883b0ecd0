"""Build recipes for the Pulumi CLI, its Python language host and the Kubernetes provider."""
