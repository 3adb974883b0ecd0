"""The thin Pulumi layer: ComponentResources that register objects built by the pure renderers."""
