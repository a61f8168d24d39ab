"""The warc component: the crawled firehose archived as WARC/1.1 files (warcio), with CDXJ indexes.

`records` turns a page message into WARC records (request + response, revisits, metadata), `files`
writes them to Heritrix-named files that are renamed from `.open` when closed, and `loop` reads the
firehose in a consumer group and commits offsets only after the records are flushed and fsynced.
May import: `utils` (never another component).
"""
