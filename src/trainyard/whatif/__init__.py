"""`trainyard platform whatif`: a stack change's effect on scheduling, replayed on the model before `pulumi up`."""
