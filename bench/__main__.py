"""``python -m bench``: run the benchmark (what ``scripts/bench`` calls)."""

from bench.runner import main

main()
