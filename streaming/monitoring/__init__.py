"""What operators see: the metrics endpoint (Prometheus, status page), the Spark UI's descriptions, each
micro-batch's observations and the state-change log."""
