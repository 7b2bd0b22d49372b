"""Files on disk: backup snapshot archives."""
