"""MongoDB: the client and its indexes, one repository per kind of record, the transactions that
span records (`lifecycle.py`), the outbox, the blob store, the caches kept in MongoDB, and
tenant snapshots."""
