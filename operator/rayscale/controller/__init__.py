"""The RayCluster controller: pure planning of pods, services and status, plus thin apply code."""
