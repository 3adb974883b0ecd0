"""The TrainJob controller's runtime: everything that talks to the API server or listens on a socket.

Named with controller-runtime's nouns. `apiserver` (the one API client), `ratelimit` (client-side
token bucket), `informer` (list+watch into stores), `cache` (reads served from the stores), `workqueue`
(rate-limited priority queue), `leader` (Lease election, write fencing), `manager` (wires informers, queue,
workers, metrics and health), `reconciler` (one reconcile: read, build with the pure core, apply, status),
`apply_record` (skip applies that would change nothing), `gang_events` (the waiting gang's event),
`https_server`, `webhook_server`, `status_server` (the three HTTPS servers) and `run_command` (the process).

It imports the pure core (`trainyard.controller`), never the other way round (tests/unit/test_layers.py).
"""
