"""Observing the cluster: a worker Pod and its Node read into an attempt's state and failure reason.

The Pod cache the watch feeds, the reads a pass makes, the classification of a Pod (and its Node) into
one verdict, the drain hold, and the observation of every current attempt.
"""
