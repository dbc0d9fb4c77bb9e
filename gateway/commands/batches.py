"""``ft-gateway batches``: the batches in the store the config names, listed (or one
cancelled, with ``--cancel``).

It reads the store directly (SQLite in the state directory, or Redis), so it
works with or without a gateway running; a cancel is the same step as
``POST /v1/batches/{id}/cancel`` (the batch's runner, wherever it runs, stops
sending its lines and writes its files). Exit status: 0 done, 1 no such batch
or one that has ended, 2 the config or the store cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import orjson

from gateway.batches.api import cancel_batch
from gateway.batches.store import BatchStore, make_batch_store
from gateway.errors import GatewayError, StoreUnavailable
from gateway.settings import config_path, load_settings
from gateway.yamlsource import SourceError


def add_arguments(p: Any) -> None:
    """The command's flags."""
    p.add_argument("--config", help="config file (default: $FT_GATEWAY_CONFIG or ./config.yaml)")
    p.add_argument("--status", help="list only batches in this status (e.g. in_progress)")
    p.add_argument("--json", action="store_true", help="list one Batch object per line")
    p.add_argument(
        "--cancel", metavar="BATCH_ID", help="cancel this batch (its answered lines are kept)"
    )


def _row(doc: dict[str, Any]) -> str:
    batch = doc["batch"]
    counts = batch["request_counts"]
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch["created_at"]))
    done = f"{counts['completed']}+{counts['failed']}/{counts['total']}"
    owner = doc["client"] or doc["owner"][:16]
    return (
        f"{batch['id']}  {batch['status']:<11}  {done:>13}  {created}  {batch['endpoint']}  {owner}"
    )


async def _run(store: BatchStore, args: argparse.Namespace) -> int:
    try:
        if args.cancel is not None:
            try:
                doc = await cancel_batch(store, args.cancel, None)
            except GatewayError as exc:
                print(f"ft-gateway batches: {exc.message}", file=sys.stderr)
                return 1
            if doc is None:
                print(f"ft-gateway batches: no batch {args.cancel}", file=sys.stderr)
                return 1
            print(f"{args.cancel}: {doc['batch']['status']}")
            return 0
        docs = await store.list_batches(None)
        for doc in docs:
            batch = doc["batch"]
            if args.status is not None and batch["status"] != args.status:
                continue
            if batch["status"] in ("in_progress", "finalizing", "cancelling"):
                completed, failed = await store.counts(batch["id"])
                batch["request_counts"] |= {"completed": completed, "failed": failed}
            print(orjson.dumps(batch).decode() if args.json else _row(doc))
        return 0
    finally:
        await store.aclose()


def run(args: argparse.Namespace) -> int:
    """List or cancel batches; 0 done, 1 no such batch (or ended), 2 no config or store."""
    try:
        settings = load_settings(config_path(args.config))
    except SourceError as exc:
        print(f"ft-gateway batches: cannot read the config:\n{exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(make_batch_store(settings.batches), args))
    except StoreUnavailable as exc:
        print(f"ft-gateway batches: {exc.message}", file=sys.stderr)
        return 2
