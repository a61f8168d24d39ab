"""Many apps on one cluster: per-app quotas (`quotas`, watched live in ZooKeeper by `watch`), the
edge's quota check (`gate`), per-app usage and figures kept in Redis (`usage`, exported by
`metrics`), and the REST gateway's API keys per app (`api_keys`).

May import: `utils.config`, `utils.observability`, `utils.schemas`, `utils.frontier`.
"""
