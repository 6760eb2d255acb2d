"""The OpenAI-compatible backend: any server that speaks ``POST /v1/chat/completions``
(llama.cpp's server, Ollama, LM Studio, vLLM, ``mlx_lm.server``, a hosted API).

Its pieces: the HTTP client under the openai SDK and the bounds it enforces (``call_limits``,
``transport``), the request and the mapping of its failures (``errors``), the servers' words
for a request too large for the window (``overflow``), asking a server for the window
(``context_probe``), finding servers on this machine (``local_servers``) and importing the SDK
ahead of the first call (``warm_sdk``).
"""
