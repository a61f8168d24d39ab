"""The REST gateway (Scrapy Cluster's rest service, port 5343)."""
