"""The Batch API's paths, apart from its handlers: the Envoy processor refuses them by
name (extproc/decision.py) and must load none of the proxy that the handlers use."""

from __future__ import annotations

FILES = "/v1/files"
FILE = "/v1/files/{file_id}"
CONTENT = "/v1/files/{file_id}/content"
BATCHES = "/v1/batches"
BATCH = "/v1/batches/{batch_id}"
CANCEL = "/v1/batches/{batch_id}/cancel"
