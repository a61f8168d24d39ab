"""Shoal's example of a user package: the `shop` spider, its item and its validating pipeline."""
