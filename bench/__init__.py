"""Benchmark harness: fake engine, contenders, load generators, report (see bench/README.md)."""
