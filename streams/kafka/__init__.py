"""The Kafka path: the lines envelope, publishing archives to the lines topic, and the
exactly-once stream worker (one transactional engine, hosted by a Faust app)."""
