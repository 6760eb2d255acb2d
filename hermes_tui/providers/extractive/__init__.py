"""The provider that needs no model: the extractive summarizer, the built-in fallback for passes.

A provider like the others (``auxiliary.compression.provider: extractive``), and the one that
always works: the app runs passes with it when no compression model can be set up. It serves
compaction only (it cannot hold a conversation) and imports nothing but compaction and core.
"""
