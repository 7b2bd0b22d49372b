"""Chunk contexts written by a language model: the provider interface and its two providers."""
