"""The cluster: one client for its REST API, the embedded local cluster, addresses, ports,
and a connection's step-by-step diagnosis."""
