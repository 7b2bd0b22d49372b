"""Redis: the search caches and their change announcements, and request rate limits."""
