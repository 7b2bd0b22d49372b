"""The crawl worker: one URL of a crawl job per message (`crawl.pages.v1`)."""
