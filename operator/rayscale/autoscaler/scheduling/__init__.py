"""The pieces of the embedded scheduler; `rayscale.autoscaler.scheduler` puts them together."""
