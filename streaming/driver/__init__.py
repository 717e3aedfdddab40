"""The controller process on the Spark driver: entry points, settings in, the lease, start-up and the failover
hand-off, the query's wiring, the threads beside it, and a clean stop."""
