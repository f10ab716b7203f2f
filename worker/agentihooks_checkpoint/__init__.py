"""The checkpoint contract shared by the controller and the worker.

Both sides import this package and nothing else of each other: the checkpoint
record model and schema, the verification verdicts, the stores, the restore
directive and outcome, and the launch record the worker boots from.
"""
