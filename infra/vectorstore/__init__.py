"""The vector store: the port every store implements, the embedded engine, the Qdrant API, the
embedded engine served to other processes, and the choice between them."""
