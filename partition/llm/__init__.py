"""LLM decoders as shape-only IR graphs."""
