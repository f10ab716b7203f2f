"""Helpers shared by the test suites: real servers started on loopback, never in-process fakes."""
