"""The running process: logging, Prometheus metrics, work drained after a request, giving
free memory back and tracing allocations."""
