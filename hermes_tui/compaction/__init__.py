"""Compaction: the window (head/tail), micro passes, batch compression, prompts, checks.

Works on plain message lists; imports no UI, no SQLite and no HTTP.
"""
