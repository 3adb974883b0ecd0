"""`trainyard usage`: GPU-hours, borrowing, queue waits and outcomes per tenant, queue, runtime or priority class,
read from the platform's Prometheus (the usage record `cluster up` starts, or a stack's Prometheus by URL).

record: the facts of a window as plain values; account: the figures computed from them (pure);
prometheus: the HTTP reads that fill a record; render: table, JSON and CSV.
"""
