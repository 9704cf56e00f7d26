"""Traffic management: the router convention (shares, session affinity) and guarded
incremental rollouts."""
