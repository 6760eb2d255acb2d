"""The conversation model's side of every backend: the streaming chat client protocol and its
events (``client``), tool calls a model wrote as text (``text_tool_calls``) and the client that
stands in when none could be set up (``unavailable``). The backends are in ``providers/``."""
