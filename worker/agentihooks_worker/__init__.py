"""The worker side: the Pod entrypoint, the Restorer, the supervisor, harness adapters and capture."""
