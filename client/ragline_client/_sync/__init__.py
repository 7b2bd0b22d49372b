"""The synchronous client (`Ragline`), generated from the asynchronous one."""
