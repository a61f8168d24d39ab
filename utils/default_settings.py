"""Every Shoal setting with its default, shared by all components.

Names follow Scrapy Cluster 1.3 where the concept is the same (reference §10). Each setting can be
overridden by a settings file, by an environment variable `SHOAL_<NAME>`, or on the command line
(`-s NAME=VALUE`), in that order. The README's settings table is generated from this module, so the
comment after each setting is its documentation: unit first, then meaning.
"""

from __future__ import annotations

# --- Redis -------------------------------------------------------------------------------------
REDIS_HOST = "127.0.0.1"  # host name of Redis (or of one start-up node of a Redis Cluster)
REDIS_PORT = 6379  # TCP port of Redis
REDIS_DB = 0  # database number (ignored in cluster mode)
REDIS_PASSWORD = ""  # password; empty = none
REDIS_SOCKET_TIMEOUT = 10.0  # seconds; connect and socket timeout of every Redis call
REDIS_CLUSTER = False  # bool; REDIS_HOST:REDIS_PORT is a Redis Cluster start-up node

# --- Kafka -------------------------------------------------------------------------------------
KAFKA_HOSTS = ["127.0.0.1:9092"]  # list of host:port; comma-separated in the environment
KAFKA_TOPIC_PREFIX = "demo"  # prefix of every topic: <prefix>.incoming, .crawled_firehose, ...
KAFKA_INCOMING_TOPIC = ""  # topic the kafka monitor reads; empty = <prefix>.incoming
KAFKA_GROUP = "demo-group"  # consumer group of the kafka monitors
KAFKA_FEED_TIMEOUT = 10.0  # seconds; how long `shoal feed` waits for the broker to confirm
KAFKA_CONSUMER_AUTO_OFFSET_RESET = "earliest"  # where a new consumer group starts
KAFKA_CONSUMER_TIMEOUT = 50  # milliseconds; one poll of a consumer
KAFKA_CONSUMER_FETCH_MESSAGE_MAX_BYTES = 10 * 1024 * 1024  # bytes; max_partition_fetch_bytes
KAFKA_CONSUMER_MAX_RECORDS = 2000  # messages; most records one poll returns (the monitor's batch)
KAFKA_CONSUMER_SESSION_TIMEOUT_MS = 6000  # milliseconds; group session (short: fast rebalances)
KAFKA_CONSUMER_HEARTBEAT_MS = 1000  # milliseconds; group heartbeat interval
KAFKA_CONSUMER_MAX_POLL_INTERVAL_MS = 10000  # milliseconds; longest gap between polls
KAFKA_PRODUCER_BATCH_LINGER_MS = 25  # milliseconds; producer linger before sending a batch
KAFKA_PRODUCER_BATCH_BYTES = 1024 * 1024  # bytes; most bytes of one producer batch per partition
KAFKA_PRODUCER_MAX_REQUEST_SIZE = 10 * 1024 * 1024  # bytes; largest page message sent with body
KAFKA_PRODUCER_COMPRESSION = "none"  # none, gzip, snappy, lz4 or zstd
KAFKA_PRODUCER_ACKS = "all"  # 0, 1 or all; "all" = confirmed by every in-sync replica
KAFKA_APPID_TOPICS = False  # bool; also send pages/answers to <prefix>.crawled_<appid>/.outbound_<appid>
KAFKA_BASE_64_ENCODE = False  # bool; base64-encode every page body (binary bodies always are)
KAFKA_TOPIC_PARTITIONS = 6  # partitions of the topics Shoal creates when they are missing

# --- ZooKeeper ---------------------------------------------------------------------------------
ZOOKEEPER_ENABLED = True  # bool; watch the domain config in ZooKeeper (runs without it when down)
ZOOKEEPER_HOSTS = "127.0.0.1:2181"  # comma-separated host:port list
ZOOKEEPER_ASSIGN_PATH = "/scrapy-cluster/crawler/"  # parent node of the config node
ZOOKEEPER_ID = "all"  # config node name under ZOOKEEPER_ASSIGN_PATH
ZOOKEEPER_TIMEOUT = 5.0  # seconds; connection timeout of the ZooKeeper client

# --- Scheduling and throttle -------------------------------------------------------------------
QUEUE_HITS = 10  # requests; default throttle: hits per window per throttle key
QUEUE_WINDOW = 60  # seconds; default throttle window
QUEUE_MODERATED = True  # bool; spread a window's hits evenly (one every window/hits seconds)
SCHEDULER_TYPE_ENABLED = True  # bool; throttle key includes the spider type
SCHEDULER_IP_ENABLED = False  # bool; throttle key includes the public IP (detected off the reactor)
SCHEDULER_BACKLOG_BLACKLIST = True  # bool; ZooKeeper-blacklisted domains may still be queued
SCHEDULER_POP_BATCH = 8  # requests; most requests one pop call hands out
SCHEDULER_SCAN_LIMIT = 500  # domains; most domain heads one pop call examines
SCHEDULER_IDLE_POLL = 0.05  # seconds; how often an idle spider asks Redis for work
SCHEDULER_FLUSH_INTERVAL = 0.05  # seconds; most time found links and acks wait before their write
SCHEDULER_IP_REFRESH = 60  # seconds; public IP refresh and spider heartbeat period
PUBLIC_IP_URL = "http://ip.42.pl/raw"  # URL answering the public IP (only with SCHEDULER_IP_ENABLED)
PUBLIC_IP_TIMEOUT = 5.0  # seconds; timeout of the public IP lookup
IP_ADDR_REGEX = r"(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})"  # how to find the IP in that answer
LEASE_TIMEOUT = 120.0  # seconds; a popped request returns to its queue unless acked before this
DUPEFILTER_TIMEOUT = 600  # seconds; a crawl's dupefilter expires after this long without use
GLOBAL_PAGE_PER_DOMAIN_LIMIT = 0  # pages; most pages per crawl and domain for every crawl; 0 = none
GLOBAL_PAGE_PER_DOMAIN_LIMIT_TIMEOUT = 600  # seconds; idle expiry of that counter
DOMAIN_MAX_PAGE_TIMEOUT = 600  # seconds; idle expiry of the domain_max_pages counter
CRAWL_STATE_TIMEOUT = 86400  # seconds; idle expiry of a crawl's progress and index keys
HEARTBEAT_TIMEOUT = 120  # seconds; TTL of every process heartbeat key

# --- Scrapy (handed to Scrapy's settings by the crawler's add-on) ------------------------------
CONCURRENT_REQUESTS = 16  # requests; downloads in flight per crawler process
CONCURRENT_REQUESTS_PER_DOMAIN = 16  # requests; downloads in flight per domain per process
DOWNLOAD_TIMEOUT = 10  # seconds; download timeout of one request
DOWNLOAD_DELAY = 0.0  # seconds; Scrapy's own per-slot delay (the cluster throttle is separate)
RETRY_TIMES = 3  # attempts; retries of a failed request before it is dead-lettered
ROBOTSTXT_OBEY = True  # bool; obey robots.txt
USER_AGENT = "Shoal/0.1 (+https://github.com/shoal-crawler/shoal)"  # default User-Agent
DNSCACHE_ENABLED = True  # bool; Scrapy's in-process DNS cache

# --- Stats -------------------------------------------------------------------------------------
STATS_TIMES = [900, 3600, 21600, 43200, 86400, 604800]  # seconds; rolling windows stats report
STATS_BUCKET = 60  # seconds; resolution of time-bucketed counters (one hash field per bucket)
STATS_CYCLE = 1.0  # seconds; how often a process writes its buffered counters (one pipeline)
STATS_LIFETIME_TTL = 30 * 86400  # seconds; lifetime counters expire after this long unused
STATS_DUMP = 60  # seconds; period of the stats dump in the log; 0 = off

# --- Crawler (owned by the crawler work; add crawler settings below this line) ----------------

# --- Kafka monitor (add kafka monitor settings below this line) --------------------------------
# dotted path -> rank; a message goes to the first plugin whose schema it matches; None disables
KAFKA_MONITOR_PLUGINS: dict[str, int | None] = {  # plugin path -> rank (None disables)
    "kafka_monitor.plugins.crawl.CrawlHandler": 100,
}

# --- Redis monitor (add redis monitor settings below this line) --------------------------------
REDIS_MONITOR_PLUGINS: dict[str, int | None] = {}  # dotted path -> rank; None disables
REDIS_MONITOR_SLEEP_TIME = 0.1  # seconds; pause of an idle redis monitor loop

# --- Operations: metrics (add operations settings below this line) -----------------------------

# --- REST --------------------------------------------------------------------------------------
REST_HOST = "127.0.0.1"  # interface the REST gateway listens on
REST_PORT = 5343  # TCP port of the REST gateway (Scrapy Cluster's FLASK_PORT)

# --- Logging -----------------------------------------------------------------------------------
LOG_LEVEL = "INFO"  # DEBUG, INFO, WARNING, ERROR or CRITICAL
LOG_JSON = True  # bool; one JSON object per line (else plain text)
LOG_STDOUT = True  # bool; log to stdout (else to LOG_DIR/LOG_FILE)
LOG_DIR = "logs"  # directory of the log file when LOG_STDOUT is off
LOG_FILE = "shoal.log"  # log file name when LOG_STDOUT is off
LOG_MAX_BYTES = 10 * 1024 * 1024  # bytes; log file rotation size
LOG_BACKUPS = 5  # files; rotated log files kept

# --- Local node (`shoal up`) -------------------------------------------------------------------
RUN_DIR = ".shoal/run"  # directory of a node's supervisord, logs, pids and service data
LOCAL_SERVICES = "kafka,redis,zookeeper"  # local services `shoal up` starts on the ports above; "none"
