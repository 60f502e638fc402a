"""Benchmarks (never run by `make test`)."""
