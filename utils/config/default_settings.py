"""Every Shoal setting with its default, shared by all components.

Names follow Scrapy Cluster 1.3 where the concept is the same (reference §10). Each setting can be
overridden by a settings file, by an environment variable `SHOAL_<NAME>`, or on the command line
(`-s NAME=VALUE`), in that order. The settings reference (docs/reference/settings.md) is generated
from this module, so the comment after each setting is its documentation: unit first, then meaning.
"""

from __future__ import annotations

# --- Redis -------------------------------------------------------------------------------------
REDIS_HOST = "127.0.0.1"  # host name of Redis (or of one start-up node of a Redis Cluster)
REDIS_PORT = 6379  # TCP port of Redis
REDIS_DB = 0  # database number (ignored in cluster mode)
REDIS_USERNAME = ""  # ACL user name (Redis 6+); empty = the default user
REDIS_PASSWORD = ""  # password; empty = none. Prefer SHOAL_REDIS_PASSWORD or REDIS_PASSWORD_FILE
REDIS_PASSWORD_FILE = ""  # path of a file whose first line is the password; empty = REDIS_PASSWORD
REDIS_SSL = False  # bool; connect with TLS
REDIS_SSL_CA_FILE = ""  # path of the CA bundle that signs the server's certificate; empty = system CAs
REDIS_SSL_CERTFILE = ""  # path of the client certificate (PEM) for mutual TLS; empty = none
REDIS_SSL_KEYFILE = ""  # path of the client certificate's private key (PEM); empty = none
REDIS_SSL_CHECK_HOSTNAME = True  # bool; the server's certificate must name REDIS_HOST (off: CA check only)
REDIS_SSL_SERVER_NAME = ""  # host name the server's certificate must carry (and SNI); empty = REDIS_HOST
REDIS_SOCKET_TIMEOUT = 10.0  # seconds; connect and socket timeout of every Redis call
REDIS_CLUSTER = False  # bool; REDIS_HOST:REDIS_PORT is a Redis Cluster start-up node
REDIS_CLUSTER_SHARDS = 12  # shards; frontier shards per cluster (each one hash tag, spread evenly over the slots)

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
KAFKA_PRODUCER_BATCH_LINGER_MS = 100  # milliseconds; producer linger before a batch is sent (100: +4 % pages/s)
KAFKA_PRODUCER_BATCH_BYTES = 1024 * 1024  # bytes; most bytes of one producer batch per partition
KAFKA_PRODUCER_MAX_REQUEST_SIZE = 10 * 1024 * 1024  # bytes; largest page message sent with body
KAFKA_PRODUCER_COMPRESSION = "none"  # none, gzip, snappy, lz4 or zstd
KAFKA_PRODUCER_ACKS = "all"  # 0, 1 or all; "all" = confirmed by every in-sync replica
KAFKA_APPID_TOPICS = False  # bool; also send pages/answers to <prefix>.crawled_<appid>/.outbound_<appid>
KAFKA_BASE_64_ENCODE = False  # bool; base64-encode every page body (binary bodies always are)
KAFKA_TOPIC_PARTITIONS = 6  # partitions of the topics Shoal creates when they are missing
KAFKA_TOPIC_REPLICATION_FACTOR = 1  # replicas of the topics Shoal creates (3 on a production cluster)
KAFKA_FIREHOSE_RETENTION_MS = 7 * 86400 * 1000  # milliseconds a page message is kept (crawled_* topics)
KAFKA_SECURITY_PROTOCOL = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (every Kafka client)
KAFKA_SASL_MECHANISM = "PLAIN"  # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (SASL_* protocols)
KAFKA_SASL_USERNAME = ""  # SASL user name
KAFKA_SASL_PASSWORD = ""  # SASL password (prefer SHOAL_KAFKA_SASL_PASSWORD or the _FILE setting)
KAFKA_SASL_PASSWORD_FILE = ""  # path of a file whose first line is the SASL password
KAFKA_SSL_CAFILE = ""  # path of the PEM CA bundle that signed the brokers' certificates; empty = system CAs
KAFKA_SSL_CERTFILE = ""  # path of the PEM client certificate (mutual TLS); empty = none
KAFKA_SSL_KEYFILE = ""  # path of the PEM private key of that certificate
KAFKA_SSL_KEY_PASSWORD = ""  # password of that key; empty = unencrypted
KAFKA_SSL_KEY_PASSWORD_FILE = ""  # path of a file whose first line is that key's password
KAFKA_SSL_CHECK_HOSTNAME = True  # bool; the broker's certificate must name the host dialled
KAFKA_FIREHOSE_RETENTION_BYTES = -1  # bytes kept per partition of a crawled_* topic; -1 = no limit

# --- ZooKeeper ---------------------------------------------------------------------------------
ZOOKEEPER_ENABLED = True  # bool; watch the domain config in ZooKeeper (runs without it when down)
ZOOKEEPER_HOSTS = "127.0.0.1:2181"  # comma-separated host:port list
ZOOKEEPER_ASSIGN_PATH = "/scrapy-cluster/crawler/"  # parent node of the config node
ZOOKEEPER_ID = "all"  # config node name under ZOOKEEPER_ASSIGN_PATH
ZOOKEEPER_TIMEOUT = 5.0  # seconds; ZooKeeper connection timeout; longest wait of a crawler for its first config
ZOOKEEPER_AUTH = ""  # user:password (digest); nodes Shoal creates are then that user's only; empty = open

# --- Scheduling and throttle -------------------------------------------------------------------
QUEUE_HITS = 10  # requests; default throttle: hits per window per throttle key
QUEUE_WINDOW = 60  # seconds; default throttle window
QUEUE_MODERATED = True  # bool; spread a window's hits evenly (one every window/hits seconds)
SCHEDULER_TYPE_ENABLED = True  # bool; throttle key includes the spider type
SCHEDULER_IP_ENABLED = False  # bool; throttle key includes the public IP (detected off the reactor)
SCHEDULER_BACKLOG_BLACKLIST = True  # bool; ZooKeeper-blacklisted domains may still be queued
SCHEDULER_POP_BATCH = 8  # requests; most requests one pop call hands out
SCHEDULER_SCAN_LIMIT = 500  # domains; most domains one pop call wakes or snoozes besides its leases
SCHEDULER_IDLE_POLL = 0.05  # seconds; how often a spider with work in flight (or on sharded Redis) asks for more
SCHEDULER_IDLE_WAIT = 2.0  # seconds; longest an idle spider blocks on its wake-up key before it asks anyway (0 = poll)
SCHEDULER_FLUSH_INTERVAL = 0.05  # seconds; most time found links and acks wait before their write
SCHEDULER_IP_REFRESH = 60  # seconds; public IP refresh and spider heartbeat period
PUBLIC_IP_URL = "http://ip.42.pl/raw"  # URL answering the public IP (only with SCHEDULER_IP_ENABLED)
PUBLIC_IP_TIMEOUT = 5.0  # seconds; timeout of the public IP lookup
IP_ADDR_REGEX = r"(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})"  # how to find the IP in that answer
LEASE_TIMEOUT = 15.0  # seconds; a lease not renewed (every third of it) nor acked for this long is re-queued
DUPEFILTER_TIMEOUT = 600  # seconds; a crawl's dupefilter expires after this long without use
GLOBAL_PAGE_PER_DOMAIN_LIMIT = 0  # pages; most pages per crawl and domain for every crawl; 0 = none
GLOBAL_PAGE_PER_DOMAIN_LIMIT_TIMEOUT = 600  # seconds; idle expiry of that counter
DOMAIN_MAX_PAGE_TIMEOUT = 600  # seconds; idle expiry of the domain_max_pages counter
CRAWL_STATE_TIMEOUT = 86400  # seconds; idle expiry of a crawl's progress and index keys
CRAWL_WEIGHT = 1.0  # weight (0.01 .. 100); a crawl's fair share when neither its request nor its app sets one
APP_SLOT_SHARES = True  # bool; when crawler slots are the bottleneck, pops share them between apps by weight
HEARTBEAT_TIMEOUT = 120  # seconds; TTL of every process heartbeat key
DUPEFILTER_MODE = "auto"  # auto, exact or bloom; a crawl's dupefilter unless its request says "dupefilter"
DUPEFILTER_EXACT_MAX = 100_000  # URLs; mode auto keeps this many of a crawl exactly (~55 B each), then Bloom stages
DUPEFILTER_FALSE_DROP = 1e-6  # ratio; mode auto: highest chance that a new URL is dropped as already seen
FRONTIER_DISK_TIER_DSN = ""  # libpq DSN of the disk tier's PostgreSQL; '' = no disk tier (every queued URL in Redis)
FRONTIER_WINDOW = 100  # requests; with the disk tier, most requests a domain keeps in Redis (the rest on disk)
FRONTIER_DISK_TIER_TABLE = "frontier_tail"  # the disk tier's table (and its partitions' name stem)
FRONTIER_DISK_TIER_PARTITIONS = 16  # partitions (by hash of the domain) the disk tier's table is created with
FRONTIER_DISK_TIER_INTERVAL = 0.2  # seconds; pause between two rounds of a redis monitor's disk tier mover
DUPEFILTER_BLOOM_CAPACITY = 1_000_000  # URLs; how many URLs of one crawl a Bloom dupefilter is sized for
DUPEFILTER_BLOOM_ERROR_RATE = 0.001  # ratio; false-positive rate of a Bloom dupefilter at capacity
THROTTLE_PAUSE_MAX = 600.0  # seconds; longest cluster-wide hold-back of a domain (Retry-After, Crawl-delay)

# --- Scrapy (handed to Scrapy's settings by the crawler's add-on) ------------------------------
CONCURRENT_REQUESTS = 16  # requests; downloads in flight per crawler process
CONCURRENT_REQUESTS_PER_DOMAIN = 16  # requests; downloads in flight per domain per process
DOWNLOAD_TIMEOUT = 10  # seconds; download timeout of one request
DOWNLOAD_DELAY = 0.0  # seconds; Scrapy's own per-slot delay (the cluster throttle is separate)
RETRY_TIMES = 3  # attempts; retries of a failed request before it is dead-lettered (blocks have the ladder's own)
ROBOTSTXT_OBEY = True  # bool; obey robots.txt
USER_AGENT = "Shoal/0.1 (+https://github.com/shoal-crawler/shoal)"  # default User-Agent
DNSCACHE_ENABLED = True  # bool; Scrapy's in-process DNS cache
RETRY_HTTP_CODES = [500, 502, 503, 504, 522, 524, 408, 429]  # HTTP statuses retried (Scrapy's list)

# --- Hostile sites and untrusted clients (docs/reference/security.md) -----------------------------------
DOWNLOAD_MAXSIZE = 0  # bytes; largest body (after decompression) a crawler keeps; 0 = what a page message carries
DOWNLOAD_WARNSIZE = 0  # bytes; a body larger than this is logged; 0 = half of DOWNLOAD_MAXSIZE
ROBOTSTXT_MAXSIZE = 512 * 1024  # bytes; largest robots.txt read (Google reads 500 KiB)
URL_LENGTH_MAX = 2083  # characters; longer seeds and links are refused (Scrapy's URLLENGTH_LIMIT)
LINKS_PER_PAGE_MAX = 10000  # links; most links followed from one page, the rest counted as links_capped
URL_ALLOWED_SCHEMES = ["http", "https"]  # URL schemes a seed, link or redirect may use
ADDRESS_DENIED_NETWORKS = [  # CIDR list; never fetched, nor an IPv6 address carrying one (mapped, NAT64, 6to4, Teredo)
    "169.254.0.0/16", "fe80::/10",  # link-local: AWS, GCP, Azure, OpenStack metadata at 169.254.169.254
    "fd00:ec2::254/128", "fd20:ce::254/128",  # AWS and GCP metadata over IPv6
    "100.100.100.200/32", "168.63.129.16/32", "192.0.0.192/32",  # Alibaba metadata, Azure wireserver, Oracle
]  # fmt: skip
ADDRESS_DENY_PRIVATE = False  # bool; also refuse every address that is not global (private, loopback, CGNAT)
PROXY_REQUEST_ALLOWED: list[str] = []  # list of proxy URLs a crawl's `proxy` may name besides PROXY_LIST's; "*" = any

# --- Page bounds (issue 30: what one page may cost the crawler and its message) ----------------
LINKS_PARSE_BYTES_MAX = 16 * 1024 * 1024  # bytes; most of a body parsed for links (anchors past it: links_capped)
LINKS_PARSE_SECONDS_MAX = 3.0  # seconds; most time one page's link parse takes (checked every 256 KiB); 0 = none
RESPONSE_HEADERS_COUNT_MAX = 500  # headers; most response header lines a page keeps (the page flagged past it)
RESPONSE_HEADERS_BYTES_MAX = 256 * 1024  # bytes; most bytes of header names and values a page keeps (flagged past it)

# --- Extraction and near-duplicates (a crawl's `extract` and `near_duplicates`; docs/how-to/search-index.md) ---
EXTRACT_DEFAULT: list[str] = []  # list of "text", "markdown", "metadata"; what every crawl extracts unasked
EXTRACT_WORKERS = 2  # processes per crawler; extraction workers, started on the first page of a crawl that asks
EXTRACT_SECONDS_MAX = 10.0  # seconds; most time one page's extraction takes (its worker is killed and replaced)
EXTRACT_MEMORY_MAX = 1024  # MiB; address space of one extraction worker (a page past it fails alone, flagged)
EXTRACT_BYTES_MAX = 8 * 1024 * 1024  # characters; most of a page handed to the extractor (the rest cut, flagged)
NEAR_DUPLICATE_DISTANCE = 6  # bits of 64; SimHashes this close are near-duplicates (found surely within 4, mostly to 7)
NEAR_DUPLICATE_FIRST_URLS = True  # bool; keep each text's first URL for `duplicate_of` (~100 B more per page)
NEAR_DUPLICATE_TTL = 30 * 86400  # seconds; an app's near-duplicate index expires this long after its last new page
NEAR_DUPLICATE_HOST_BUDGET = 50  # pages; near-duplicates of one host in a crawl after which its links are not followed

# --- Sitemaps (a crawl's `sitemaps`, issue 31; docs/how-to/sitemaps.md) ------------------------
SITEMAP_URLS_MAX = 50000  # entries; most URLs (or sitemaps of an index) kept from one sitemap file, the rest counted
SITEMAP_BYTES_MAX = 50 * 1024 * 1024  # bytes; most XML read from one sitemap, after gzip decompression (rest counted)
SITEMAP_DEPTH_MAX = 3  # levels; most sitemap indexes followed below the first sitemap (deeper ones counted, not read)
SITEMAP_STATE_TTL = 30 * 86400  # seconds; a sitemap's seen-lastmod state expires this long after its last poll

# --- Stats -------------------------------------------------------------------------------------
STATS_TIMES = [900, 3600, 21600, 43200, 86400, 604800]  # seconds; rolling windows stats report
STATS_BUCKET = 60  # seconds; resolution of time-bucketed counters (one hash field per bucket)
STATS_CYCLE = 1.0  # seconds; how often a process writes its buffered counters (one pipeline)
STATS_LIFETIME_TTL = 30 * 86400  # seconds; lifetime counters expire after this long unused
STATS_DUMP = 60  # seconds; period of the stats dump in the log; 0 = off

# --- Crawler (owned by the crawler work; add crawler settings below this line) ----------------
RETRY_BACKOFF_BASE = 1.0  # seconds; delay before the first retry, doubled for each further one
RETRY_BACKOFF_MAX = 60.0  # seconds; longest delay between two tries of a request
RETRY_PRIORITY_ADJUST = -10  # priority; added to a request's priority for each retry (Scrapy Cluster)
STATS_RESPONSE_CODES: list[int] = []  # HTTP statuses counted per spider in stats; empty = every status
SPIDER_MODULES: list[str] = []  # list of module paths; modules (and their submodules) holding user spiders
SCRAPY_SETTINGS: dict[str, object] = {}  # dict; Scrapy settings merged into the crawler's (pipelines, middlewares, ...)
SCRAPY_SETTINGS_MODULE = ""  # module path; a Scrapy settings module merged before SCRAPY_SETTINGS; empty = none

# --- Rendering (the `render` spider: pages loaded in headless Chromium) ------------------------
RENDER_BROWSER_PATH = "/usr/bin/chromium"  # path; the Chromium the render spider drives (Debian's package)
RENDER_MAX_PAGES = 4  # pages; browser pages open at once in one render process (its concurrency)
RENDER_PAGES_PER_CONTEXT = 100  # pages; a fresh browser context (cookies, cache, storage) after this many (issue 37)
RENDER_PAGES_PER_BROWSER = 200  # pages; the browser is restarted after this many (browsers leak); 0 = never
RENDER_BROWSER_MEMORY_MAX = 768  # MiB; the browser is restarted when its processes' resident memory passes this
RENDER_MEMORY_CHECK_INTERVAL = 2.0  # seconds; shortest time between two measurements of the browser's memory
RENDER_TIMEOUT = 15.0  # seconds; longest load-and-settle of one page; past it the attempt fails (retry, dead letter)
RENDER_SETTLE = "networkidle"  # networkidle, load or domcontentloaded; what "settled" means without a selector
RENDER_BLOCKED_RESOURCES = ["image", "media", "font"]  # Playwright resource types the browser never fetches
RENDER_STATS_INTERVAL = 5.0  # seconds; how often a render process writes its figures to Redis (dashboard)

# --- Kafka monitor (add kafka monitor settings below this line) --------------------------------
# dotted path -> rank; a message goes to the first plugin whose schema it matches; None disables
KAFKA_MONITOR_PLUGINS: dict[str, int | None] = {  # plugin path -> rank (None disables); Scrapy Cluster's PLUGINS
    "kafka_monitor.plugins.crawl.CrawlHandler": 100,
    "kafka_monitor.plugins.action.ActionHandler": 200,
    "kafka_monitor.plugins.stats.StatsHandler": 300,
    "kafka_monitor.plugins.zookeeper.ZookeeperHandler": 400,
}
KAFKA_MONITOR_WRITE_CHUNK = 500  # messages; a batch's pipeline is sent in chunks this size while the next is validated
KAFKA_MONITOR_RETRY_MAX_BACKOFF = 10.0  # seconds; longest wait between two tries to write a batch while Redis is down
KAFKA_MONITOR_UNASSIGNED_GRACE = 120.0  # seconds; with no partition this long a kafka monitor is unhealthy; 0 = never
KAFKA_MONITOR_BACKPRESSURE_INTERVAL = 1.0  # seconds; shortest time between two checks of Redis memory and backlog
KAFKA_MONITOR_MEMORY_HIGH_WATER = 0  # bytes; pause consuming at this Redis used_memory; 0 = 90 % of maxmemory, if set
KAFKA_MONITOR_MEMORY_LOW_WATER = 0  # bytes; resume consuming below this used_memory; 0 = 80 % of the high-water mark
KAFKA_MONITOR_BACKLOG_HIGH_WATER = 0  # requests; pause consuming when all spiders' queues hold this many; 0 = off
KAFKA_MONITOR_BACKLOG_LOW_WATER = 0  # requests; resume consuming below this backlog; 0 = 80 % of the high-water mark

# --- Redis monitor (add redis monitor settings below this line) --------------------------------
REDIS_MONITOR_PLUGINS: dict[str, int | None] = {  # dotted path -> rank; None disables
    "redis_monitor.plugins.info.InfoMonitor": 100,
    "redis_monitor.plugins.stop.StopMonitor": 200,
    "redis_monitor.plugins.expire.ExpireMonitor": 300,
    "redis_monitor.plugins.stats.StatsMonitor": 400,
    "redis_monitor.plugins.zookeeper.ZookeeperMonitor": 500,
    "redis_monitor.plugins.dead_letters.DeadLetterMonitor": 600,
    "redis_monitor.plugins.reaper.ReaperMonitor": 700,
    "redis_monitor.plugins.finished.FinishedMonitor": 800,
    "redis_monitor.plugins.apps.AppsMonitor": 900,
    "redis_monitor.plugins.tier.TierMonitor": 1000,
}
REDIS_MONITOR_SLEEP_TIME = 0.1  # seconds; shortest pause of an idle redis monitor loop (a job or due work ends it)
REDIS_MONITOR_BATCH = 10  # jobs; most jobs one monitor takes per round (small: idle monitors share a burst)
REDIS_MONITOR_CLAIM_IDLE = 30.0  # seconds; a job pending this long at another monitor is taken over (it died)
REDIS_MONITOR_RETRY_DELAY = 1.0  # seconds; wait before a failed job is tried again (doubles per attempt)
RETRY_FAILURES_MAX = 3  # attempts; a job that failed this often is answered with an error and dropped
STOP_BLACKLIST_TTL = 3600  # seconds; a stopped or expired crawl refuses new children this long (then reusable)
REAPER_INTERVAL = 1.0  # seconds; period of the lease reaper's pass over every spider's in-flight set
REAPER_BATCH = 500  # leases; most expired leases one reaper call re-queues or dead-letters
EXPIRE_INTERVAL = 1.0  # seconds; period of the check for crawls whose `expires` time has passed
FINISHED_INTERVAL = 1.0  # seconds; period of the check for crawls with nothing queued, in flight or delayed
APPS_REFRESH_INTERVAL = 2.0  # seconds; period of the per-app figures (queued, pages/s, quota use) in Redis
STATS_DUMP_CRAWL = True  # bool; the periodic stats dump also logs the crawlers' counters
STATS_DUMP_QUEUE = True  # bool; the periodic stats dump also logs the queue backlogs

# --- Operations: metrics (add operations settings below this line) -----------------------------
METRICS_ENABLED = True  # bool; serve Prometheus metrics at http://METRICS_HOST:METRICS_PORT/metrics
METRICS_HOST = "127.0.0.1"  # interface the metrics endpoint listens on; 0.0.0.0 in containers
METRICS_PORT = 0  # TCP port of the metrics endpoint; 0 = a free port (`shoal status --json` shows it)
METRICS_LABEL_VALUES = 50  # values; distinct values kept per free-form label (reason, topic...), more = "other"
METRICS_TOP_DOMAINS = 20  # domains; per spider, the largest backlogs exported with a domain label
METRICS_DOMAIN_SCAN_LIMIT = 10000  # domains; most domain queues per spider one frontier reading measures
METRICS_FRONTIER_CACHE = 5.0  # seconds; a frontier reading (depths, backlogs) is reused this long
SCALING_CRAWLER_PAGES_PER_SEC = 80.0  # pages/s; one crawler process (DESIGN.md: >= 0.9 x ~97 of plain Scrapy)
SCALING_RENDER_PAGES_PER_SEC = 2.3  # pages/s; one render process (spider `render`; measured 2.33, performance.md)
SCALING_UNTHROTTLED_DOMAIN_RATE = 80.0  # pages/s; what a due domain with no throttle (QUEUE_HITS 0) may take
SCALING_RATE_WINDOW = 120  # seconds; observed pages/s per process over this many whole STATS_BUCKETs
SCALING_MIN_REPLICAS = 1  # processes; recommended count of an idle frontier (per spider)
SCALING_MAX_REPLICAS = 100  # processes; most processes a recommendation names (per spider)
SCALING_LAG_PER_CONSUMER = 5000  # messages; consumer-group lag one kafka monitor or sink is recommended per
ALERT_DEAD_LETTER_RATE = 0.2  # dead letters/s; ShoalDeadLettersGrowing above it (alerts.yml, checked by a test)
ALERT_DEAD_LETTER_WINDOW = 300  # seconds; ShoalDeadLettersGrowing's rate window (rate(...[5m]))
ALERT_DEAD_LETTER_FOR = 300  # seconds; ShoalDeadLettersGrowing's `for:` (the dashboard shows it pending until then)
ALERT_LAG_MESSAGES = 10000  # messages; ShoalKafkaMonitorLagGrowing and ShoalSinkLagGrowing above this group lag
ALERT_LAG_WINDOW = 600  # seconds; the lag alerts' deriv(...[10m]): "growing" over the readings of this window
ALERT_LAG_FOR = 600  # seconds; the lag alerts' `for:`

# --- Proxy pool --------------------------------------------------------------------------------
PROXY_LIST = ""  # proxy URLs, each may end in #key=value,... labels; comma-separated or @path (one a line); "" = none
PROXY_BAN_CODES = [403, 407, 429, 503]  # HTTP statuses; a response through a pool proxy with one bans the proxy
PROXY_COOLDOWN = 1800.0  # seconds; quarantine of a banned proxy for a domain, doubled per repeated ban
PROXY_COOLDOWN_MAX = 86400.0  # seconds; longest quarantine after repeated bans
PROXY_GLOBAL_BAN_DOMAINS = 3  # domains; a proxy quarantined for this many domains is quarantined for all
PROXY_RETRY_TIMES = 5  # attempts; immediate retries through another proxy, apart from RETRY_TIMES
PROXY_REFRESH = 1.0  # seconds; a spider re-reads the pool's quarantines from Redis this often
PROXY_STATE_TTL = 604800  # seconds; idle expiry of the pool's counters and quarantines in Redis

# --- Sites that push back: block detection and the per-domain ladder (issue 33) -----------------
BLOCK_DETECTOR = "crawler.blocks.BlockDetector"  # import path of the block detector class (subclass it to add signs)
BLOCK_STATUSES = [403, 429, 503]  # HTTP statuses; a response with one is a block detection
BLOCK_MARKERS: list[str] = []  # list of RE2 regexes; a body matching one is a block (a domain adds more in ZooKeeper)
BLOCK_SMALL_RATIO = 0.0  # fraction; a 200 page smaller than this share of its domain's usual size is a block; 0 = off
BLOCK_LINKS_VANISHED = False  # bool; an HTML page without links where the domain's pages have some is a block
BLOCK_ITEMS_VANISHED = False  # bool; a user spider's page without items where that callback's pages had some is a block
BLOCK_MIN_SAMPLES = 5  # pages; clean pages of a domain seen before its usual size and link count are trusted
LADDER_ENABLED = True  # bool; detections move a domain up its ladder (off: detected and counted only)
LADDER_LEVELS = [0, 1, 2, 3, 4]  # list of levels in use: 0 configured, 1 slower, 2 proxied, 3 rendered, 4 paused
LADDER_UP_AFTER = 3  # detections; a domain steps up after this many within LADDER_WINDOW
LADDER_WINDOW = 60.0  # seconds; the window block detections are counted over
LADDER_DOWN_AFTER = 20  # pages; a domain steps down after this many clean pages in a row
LADDER_SLOW_DELAY = 5.0  # seconds; between two hits of a domain at levels 1-3, the first from the step (SLOT_SLACK)
LADDER_HISTORY = 100  # steps; most ladder steps kept per domain
LADDER_STATE_TTL = 604800  # seconds; idle expiry of a domain's ladder state and history in Redis
LADDER_REFRESH = 1.0  # seconds; a crawler re-reads a domain's ladder level from Redis this often
LADDER_PROXY_ONLY = False  # bool; the proxy pool is used only for domains at level 2 and above (else for all)
LADDER_RENDER_SPIDER = "render"  # spider name; where level 3 sends a domain's requests (while render nodes run)

# --- REST --------------------------------------------------------------------------------------
REST_HOST = "127.0.0.1"  # interface the REST gateway listens on
REST_PORT = 5343  # TCP port of the REST gateway (Scrapy Cluster's FLASK_PORT)
WAIT_FOR_RESPONSE_TIME = 5.0  # seconds; how long /feed waits for the answer before returning a poll_id
REST_POLL_RESULT_TTL = 3600  # seconds; an answer nobody waited for stays in rest:poll:<uuid> this long
REST_API_KEY = ""  # secret every route but / and /dashboard requires (X-API-Key header); empty = no key
REST_CORS_ORIGINS: list[str] = []  # list of origins allowed to call the gateway from a browser; empty = CORS off
REST_HEARTBEAT_INTERVAL = 5.0  # seconds; period of the gateway's heartbeat and health probes (SC's SLEEP_TIME)
REST_SAMPLE_INTERVAL = 2.0  # seconds; how often the gateway samples live crawls (rates, dashboard chart)
REST_RATE_WINDOW = 30.0  # seconds; pages/s and ETA are averaged over this window
REST_CHART_SECONDS = 600  # seconds; history of the dashboard's pages/s chart
REST_STREAM_INTERVAL = 1.0  # seconds; most time between two progress events of a crawl's event stream
REST_MAX_BODY_BYTES = 1024 * 1024  # bytes; larger request bodies are answered 413; 0 = unlimited
REST_JSON_MAX_DEPTH = 32  # levels; a JSON body nested deeper is answered 400; 0 = unchecked
REST_ACCESS_LOG = False  # bool; log every HTTP request (Scrapy Cluster's FLASK_LOGGING_ENABLED)

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
SERVICE_DATA_ROOT = "/var/lib/shoal"  # directory; as root, data of services that run as another user (PostgreSQL)
LOCAL_SERVICES = "kafka,redis,zookeeper"  # local services `shoal up` starts on the ports above; "none"
LOCAL_KAFKA = "apache"  # the local broker: "apache" (Apache Kafka, `make kafka`) or "tansu" (in-memory)
LOCAL_REDIS_MAXMEMORY = "2gb"  # Redis units (`512mb`, `2gb`; `0` = no limit); the local Redis refuses writes beyond it

# --- Sink: results into PostgreSQL (`shoal sink`) ----------------------------------------------
SINK_POSTGRES_DSN = "postgresql://shoal@127.0.0.1:5432/shoal"  # libpq URL or key=value string, no password in it
SINK_POSTGRES_PASSWORD = ""  # secret; the role's password (give it as SHOAL_SINK_POSTGRES_PASSWORD); never logged
SINK_POSTGRES_PASSWORD_FILE = ""  # path; a file whose first line is the password (wins over SINK_POSTGRES_PASSWORD)
SINK_POSTGRES_CONNECT_TIMEOUT = 5  # seconds; connect timeout of the sink's PostgreSQL connection
SINK_POSTGRES_OPERATION_TIMEOUT = 60.0  # seconds; most one batch write, claim or migration may take (0 = none)
SINK_DB_SCHEMA = "shoal"  # PostgreSQL schema of the sink's tables, created and migrated by the sink
SINK_PAGES_TABLE = "pages"  # table name; one row per (appid, url): the latest content of each page
SINK_ITEMS_TABLE = "items"  # table name; one row per (appid, item key): the latest version of each item
SINK_CRAWL_LOG_TABLE = "crawl_log"  # table name; append-only, one row per page message (every attempt)
SINK_STORE_BODY = True  # bool; keep page bodies in the pages table (else only their content hash)
SINK_ITEM_KEY = "url"  # field name; an item's key when its message names none in `item_key`
SINK_GROUP = "demo-sink"  # consumer group of the sinks (any number of sinks share the topics' partitions)
SINK_BATCH = 2000  # messages; most messages one transaction writes (COPY + one upsert per table)
SINK_BATCH_LINGER = 0.1  # seconds; most time a sink keeps polling to fill a batch before writing it
SINK_RETRY_MAX_BACKOFF = 10.0  # seconds; longest wait between two tries of a batch while PostgreSQL is down
SINK_TOPIC_REFRESH = 10.0  # seconds; how soon a sink notices a new topic to read (the items topic)

# --- WARC archive (`shoal warc`, issue 35) -----------------------------------------------------
WARC_ENABLED = False  # bool; `shoal up` starts the warc program (else `supervisorctl start shoal:warc`)
WARC_DIR = ""  # directory of the WARC files and their .cdxj indexes; empty = RUN_DIR/warc
WARC_PREFIX = "SHOAL"  # file name prefix; names as Heritrix's: PREFIX-TIMESTAMP17-SERIAL-PID~HOST~ID.warc.gz
WARC_MAX_SIZE = 1073741824  # bytes; a file is closed (renamed, indexed) once it passes this size
WARC_MAX_AGE = 3600.0  # seconds; a file is closed once it has been open this long, even if small
WARC_GZIP = True  # bool; record-level gzip (one gzip member per record, .warc.gz); else .warc
WARC_GROUP = "demo-warc"  # consumer group of the warc processes (any number share the firehose's partitions)
WARC_BATCH = 500  # messages; most page messages written between two fsyncs and offset commits
WARC_DIGEST_CACHE = 100000  # URLs; last payload digest remembered per URL (LRU) for identical-payload revisits
WARC_DOM_SPIDERS = ["render"]  # spider names whose body is a rendered DOM: stored as metadata, not response
WARC_S3_BUCKET = ""  # S3-compatible bucket closed files go to (then removed locally); empty = keep them in WARC_DIR
WARC_S3_PREFIX = ""  # key prefix of the uploaded objects (e.g. "crawls/2026/"); the file name follows it
WARC_S3_ENDPOINT_URL = ""  # URL of an S3-compatible server (MinIO, Ceph...); empty = AWS S3
WARC_S3_REGION = ""  # region name for the signature; empty = boto3's default
WARC_S3_CREDENTIALS_FILE = ""  # AWS credentials file ([default] aws_access_key_id...); empty = boto3's chain (env)
WARC_S3_PART_SIZE = 67108864  # bytes; multipart threshold and part size of an upload (at least 5 MiB)
WARC_S3_RETRY = 60.0  # seconds before a failed upload (file kept) is tried again

# --- Revisits: keeping data fresh (`shoal revisit`, issue 31) ----------------------------------
REVISIT_INTERVAL = 86400.0  # seconds; a page's first revisit interval when its crawl's `revisit` names none
REVISIT_MIN = 3600.0  # seconds; shortest revisit interval (a page that changes at every visit ends here)
REVISIT_MAX = 2592000.0  # seconds (30 days); longest revisit interval (a page that never changes ends here)
REVISIT_INC = 1.2  # factor; an unchanged page's interval is multiplied by it (up to REVISIT_MAX; bench/freshness.py)
REVISIT_DEC = 0.5  # factor; a changed page's interval is multiplied by it (down to REVISIT_MIN)
REVISIT_ERROR_INTERVAL = 3600.0  # seconds; next revisit after a 5xx or a failed fetch (interval kept)
REVISIT_GONE_INTERVAL = 0.0  # seconds; next revisit after a 404/410; 0 = never again
REVISIT_PRIORITY_DROP = 1  # priority steps a revisit runs below its crawl's priority (never below 1)
REVISIT_POLL = 1.0  # seconds; a revisit process's wait between two claims when nothing was due
REVISIT_BATCH = 500  # rows; most due revisits one claim takes (one transaction, FOR UPDATE SKIP LOCKED)
REVISIT_LEASE = 3600.0  # seconds; a fed revisit whose page has not come back by then is fed again
REVISIT_SINK_CHECK = 5.0  # seconds; how long the kafka monitor trusts its last look for a live sink
