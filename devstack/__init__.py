"""The local default for development, tests and benchmarks: stand-in servers on 127.0.0.1 and
the Ragline processes (`python -m devstack run`). Never used in production."""
