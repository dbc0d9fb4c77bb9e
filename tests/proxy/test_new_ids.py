"""A request's new id: a version-4 UUID's 122 random bits, drawn from the system
256 ids at a time, never the same twice, and a forked worker's never its parent's."""

from __future__ import annotations

import os
import uuid

from gateway.proxy.headers import request_ids


def new_id() -> tuple[bytes, str, bytes]:
    as_bytes, as_text, engines = request_ids([])
    assert engines is not None  # a new id (the client sent none)
    return as_bytes, as_text, engines


def test_new_ids_are_version_4_uuids_never_repeated_across_draws() -> None:
    ids = [new_id() for _ in range(1000)]  # four draws and more
    assert len({text for _, text, _ in ids}) == 1000
    for as_bytes, as_text, engines in ids:
        parsed = uuid.UUID(as_text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert as_bytes == as_text.encode() and engines == str(parsed).encode()


def test_a_forked_worker_draws_ids_of_its_own() -> None:
    new_id()  # the parent holds drawn bytes not yet used
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's)
        try:
            os.write(write, b"".join(new_id()[0] for _ in range(8)))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        theirs = pipe.read()
    os.waitpid(child, 0)
    mine = b"".join(new_id()[0] for _ in range(8))
    assert len(theirs) == len(mine) == 8 * 32
    assert {theirs[i : i + 32] for i in range(0, 256, 32)}.isdisjoint(
        {mine[i : i + 32] for i in range(0, 256, 32)}
    )
