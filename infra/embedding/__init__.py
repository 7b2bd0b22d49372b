"""Embedding models: the port, the local model (ONNX Runtime for queries), Gemini, the hashed
embedder for tests of mechanics, and query batching."""
