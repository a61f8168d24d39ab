"""Pages ready for search and LLM pipelines: main text, Markdown and metadata (trafilatura, extruct),
a 64-bit SimHash of the text, and the bounded worker processes that run them off the crawler's reactor.

Nothing here imports trafilatura or extruct at module level: a crawl that asks for no extraction
never loads them (`content` is imported inside the worker processes only).
"""
