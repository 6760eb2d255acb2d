"""GGUF files (llama.cpp's format) into MLX model folders: the header, the conversion, Q4_K repacking, the tokenizer."""
