"""trainyard's Pulumi policy pack: what stack validation cannot see (the resources actually registered)."""
