"""Reaching a model. One folder per backend: ``mlx/`` (in-process), ``openai/`` (any
OpenAI-compatible endpoint), ``extractive/`` (no model at all); the names config.yaml gives them
are ``config.provider_registry``'s. Beside them, what spans backends: which one serves a role and
the client or summarizer it makes (``selection``, over ``backend``, what a backend package
offers), the context window's size (``context_limit``, ``context_table``,
``context_resolution``) and choosing a model for a role (``choices``)."""
