"""Configuration and the process basics every other concept builds on.

Owns: layered settings and their defaults (`settings`, `default_settings`, `settings_doc`), structured
JSON logging (`log`), the one factory per client for Redis, Kafka and ZooKeeper (`clients`) and
PostgreSQL (`postgres`: the sink's DSN and password), the error tree (`errors`), the plugin loader of
both monitors (`plugins`), credential redaction (`redact`), users' regexes on RE2 (`safe_regex`) and
proxy labels (`proxy_labels`: PROXY_LIST entries, crawl requests and domain entries share one syntax).
May import: nothing else of `utils` (it is the bottom layer).
"""
