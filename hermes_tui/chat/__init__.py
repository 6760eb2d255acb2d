"""The conversation model: one streaming chat interface, two providers (MLX, OpenAI-compatible)."""
