"""Reaching a model: one folder per backend (``mlx/`` in-process, ``openai/`` any OpenAI-compatible
endpoint), which provider serves a role (``select``), window sizes (``context_limits``) and choosing
a model for a role (``choices``)."""
