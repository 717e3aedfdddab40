"""The controller as a Spark Structured Streaming job; its packages by concern are in docs/design/architecture.md."""
