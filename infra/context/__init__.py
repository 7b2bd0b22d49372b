"""Chunk contexts written by an LLM: the provider interface, its two providers, the cache."""
