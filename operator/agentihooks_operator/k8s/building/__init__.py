"""Building worker Pods: the Pod, Secret and launch record of an attempt, from the Swarm's spec.

The Pod template a Swarm may give (its schema is the real Kubernetes one), the policy it must meet,
the provider credential copied into the attempt's Secret, and the checks of a root checkpoint volume.
"""
