"""The sink: pages and items from Kafka into PostgreSQL, upserted with change detection, plus a crawl log.

`messages` turns Kafka records into rows (or dead letters), `schema` creates and migrates the tables,
`store` writes one batch per transaction (COPY into staging tables, one upsert per table), `feed`
reads the topics in a consumer group and `loop` ties them: offsets are committed only after the
transaction, so a crash replays a batch, and the upserts make the replay change nothing.
May import: `utils` (never another component).
"""
