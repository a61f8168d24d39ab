"""Kafka monitor plugins: one JSON Schema and one handler per request kind."""
