"""The vector store's generations: following them, and building a new one for another
embedding model (`schemas.index_generations`)."""
