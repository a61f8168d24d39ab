"""The redis monitor: carries out actions, answers stats requests, expires crawls, reaps leases."""
