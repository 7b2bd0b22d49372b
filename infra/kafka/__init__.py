"""Kafka: the broker client, topics, producers and the dead-letter topics."""
