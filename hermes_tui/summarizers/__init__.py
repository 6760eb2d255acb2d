"""Summarizer backends behind ``compaction.summarizer.Summarizer``: MLX, OpenAI-compatible, extractive."""
