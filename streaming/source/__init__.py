"""Where the query reads its topics: livectl's PySpark Kafka data source, its options, and the choice between it
and Spark's own Kafka source."""
