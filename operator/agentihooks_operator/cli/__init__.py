"""The ``agentihooks`` command line: one module per command group."""
