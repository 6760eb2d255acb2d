"""Reaching a model: one folder per backend (``mlx/`` in-process, ``openai/`` any OpenAI-compatible
endpoint, ``extractive/`` no model at all), which backend serves a role and the client or
summarizer it makes (``selection``), window sizes (``context_resolution``) and choosing a model for a
role (``choices``)."""
