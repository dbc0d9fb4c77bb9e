"""``python -m bench.cost``: the cost scenarios (bench/cost/runner.py)."""

from bench.cost.runner import main

raise SystemExit(main())
