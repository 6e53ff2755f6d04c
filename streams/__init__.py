"""The edges around the domain: reading inputs (replay, live files, Kafka), writing records
(sinks) and exposing metrics. Nothing here decides what a record is; parsers/ does."""
