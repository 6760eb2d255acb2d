"""Small services with no knowledge of sessions or models: where files live (``paths``),
the agent log (``logs``), loading outside JSON and YAML (``untrusted``), outside text made
safe for a terminal (``terminal_text``), lazy package exports and fault-injection points."""
