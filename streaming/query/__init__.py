"""The controller query: routing records to buckets, the ``applyInPandasWithState`` step, the failover batch
decided ahead, and ``foreachBatch`` carrying out each micro-batch's decisions in Kafka's order."""
