"""The autoscaler: demand in, replicas and workersToDelete out."""
