"""Private local services for the Kafka path and its tests: a KRaft Kafka broker,
rsyslog shipping log files to it, Prometheus, and the `dpmstream stack` that runs them
together with a worker. Each binds 127.0.0.1 and lives in its own work dir."""
