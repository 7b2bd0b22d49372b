"""Adapters to the engines Ragline runs on, one package per engine: MongoDB (`mongo/`), Kafka
(`kafka/`), Redis (`redis/`), the vector store (`vectorstore/`), the embedding models
(`embedding/`), the chunk-context language models (`context/`), the web (`http/`), files on
disk (`files/`), and the process itself (`process/`: logging, metrics, memory). The settings
of all of them are in `settings/`. No use case, transport or process is in here."""
