"""The pure scheduling model: cluster state as capacity, fair shares, placement, gang reservation and reclaim, and
the simulator of vc-scheduler that replays a trace or estimates when pending gangs start."""
