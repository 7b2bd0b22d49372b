"""The web: the crawler's fetcher (robots.txt, per-host delays, size limits, checked redirects)."""
