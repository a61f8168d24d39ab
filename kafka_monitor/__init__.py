"""The kafka monitor: validates incoming requests and writes them into Redis."""
