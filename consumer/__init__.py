"""The running service: settings, CLI, Kafka source and sinks, burst windows, pipeline, HTTP endpoint."""
