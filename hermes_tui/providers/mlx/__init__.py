"""The MLX backend: models run in-process, on this machine's GPU (Apple silicon) or its CPU.

Its pieces: the runtime that loads each model once and runs one generation at a time
(``runtime``), the one thread all MLX work runs on (``thread``) and the KV prefix cache that
lets a call read only what changed since the last one (``prefix``).
"""
