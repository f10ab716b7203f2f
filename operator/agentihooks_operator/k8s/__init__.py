"""The Kubernetes side of the controller: the Swarm CRD, worker Pods, classification and kopf handlers."""
