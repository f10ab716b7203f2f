"""Errors of the controller package; translated to kopf or HTTP errors only at the edge."""

from __future__ import annotations


class OperatorError(Exception):
    """Base class for controller errors."""
