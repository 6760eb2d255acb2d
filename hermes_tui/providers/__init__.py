"""Reaching a model: MLX in-process, OpenAI-compatible HTTP, window sizes, failure kinds."""
