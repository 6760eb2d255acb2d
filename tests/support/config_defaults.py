"""config.yaml's defaults written out independently of the schema, for the tests that check it."""

# The defaults as the micro-compaction spec and docs/architecture.md state them, plus the documented additions (model.max_tokens:
# the reply cap the chat clients use; compression.micro_compact_mode, fact_guard, tokenizer, trim,
# trim_threshold_tokens;
# auxiliary.compression.max_tokens).
DOCUMENTED_DEFAULTS = {
    "model": {
        "provider": "auto",
        "model": "",
        "base_url": "",
        "api_key_env": "OPENAI_API_KEY",
        "context_length": None,
        "max_tokens": 1024,
        "temperature": None,
    },
    "compression": {
        "enabled": True,
        "threshold": 0.80,
        "target_ratio": 0.20,
        "protect_first_n": 3,
        "micro_compact": True,
        "trim": True,
        "trim_threshold_tokens": 600,
        "policy": "watermark",
        "high_water": 0.85,
        "low_water": 0.55,
        "micro_compact_every_n_turns": 1,
        "rewarm": True,
        "rewarm_server": False,
        "micro_compact_defrag_threshold_tokens": 2000,
        "micro_compact_mode": "append",
        "fact_guard": True,
        "user_verbatim_tokens": None,
        "tokenizer": "",
    },
    "auxiliary": {
        "compression": {
            "provider": "auto",
            "model": "",
            "base_url": "",
            "api_key_env": "OPENAI_API_KEY",
            "timeout": 120,
            "max_tokens": None,
        }
    },
    "agent": {
        "approval": "ask",
        "max_steps": 25,
        "shell_timeout": 120,
        "max_output_bytes": 32000,
        "workspace": "",
        "look_first": True,
        "result_note": True,
    },
    "mcp_servers": {},
}
