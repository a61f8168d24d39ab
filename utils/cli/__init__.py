"""The `shoal` command line: the entry point and its subcommands (`main`), `shoal demo`, `feed`
and `dump` (`kafka_tools`), `proxies`, and the docs reference tables' sync (`readme_sync`).

Components are imported lazily by dotted path, so nothing here imports a component package.
May import: every other concept of `utils` (it is the top layer).
"""
