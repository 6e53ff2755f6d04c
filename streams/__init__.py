"""The edges: file and replay drivers, Kafka/Faust, metrics, local services."""
