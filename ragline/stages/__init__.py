"""Stages hosted in a process: the runtime that runs a stage's handler on each Kafka message,
the ports handlers work through, the wiring of a stage to its topic, and the index stage.

They are shared by every process that runs a stage: each stage worker (`workers.*`), and the
API process, which runs the index stage itself with the embedded vector store. So they sit
below the workers, beside the composition root (`ragline.system`) they are built from.
"""
