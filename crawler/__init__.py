"""The Shoal crawler: a Scrapy project whose scheduler pulls from the shared Redis frontier."""
