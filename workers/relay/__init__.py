"""The relay process: the outbox's events to Kafka, and stuck documents re-driven."""
