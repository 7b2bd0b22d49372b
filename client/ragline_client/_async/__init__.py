"""The asynchronous client (`AsyncRagline`), the source the synchronous one is generated from."""
