"""/v1/files and /v1/batches as OpenAI serves them, over the batch store.

Files and batches belong to the API key that made them (with keys off, to the
bearer credential the client sent, as stored responses do): to any other key
they do not exist (OpenAI's 404). Each request is an Exchange like a proxied
one (access log, metrics), under its route's template so ids never become
labels. Creating a batch only records it (``validating``); the runner
(runner.py) validates and runs it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.batches.objects import WINDOWS, batch_object
from gateway.batches.runner import BatchRunner
from gateway.batches.store import UNFINISHED, BatchStore, FileRecord, new_id
from gateway.errors import BodyTooLarge, GatewayError, InvalidRequest, NotFound, render
from gateway.listing import page
from gateway.observe.exchange import Exchange
from gateway.proxy.headers import request_id_of
from gateway.responses.store import owner_of
from gateway.routes import BATCHES, FILES, ROUTES
from gateway.settings import Batches
from gateway.state import GatewayState

FILE = "/v1/files/{file_id}"
CONTENT = "/v1/files/{file_id}/content"
BATCH = "/v1/batches/{batch_id}"
CANCEL = "/v1/batches/{batch_id}/cancel"
PURPOSES = ("batch",)
MIN_EXPIRY, MAX_EXPIRY = 3600, 30 * 86400
_CHUNK = 1 << 20
Handler = Callable[[Request, str], Awaitable[Response]]


def _json(data: Any) -> Response:
    return Response(orjson.dumps(data), media_type="application/json")


def _file_not_found(file_id: str) -> NotFound:
    return NotFound(f"No such File object: {file_id}", param="id", code=None)


def _batch_not_found(batch_id: str) -> NotFound:
    return NotFound(f"No batch found with id '{batch_id}'.", param="batch_id", code=None)


def _expiry(form: Any, default: float, now: int) -> int:
    anchor = form.get("expires_after[anchor]")
    seconds = form.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return now + int(default)
    if anchor != "created_at":
        raise InvalidRequest(
            "Invalid 'expires_after.anchor': the only supported anchor is 'created_at'.",
            param="expires_after.anchor",
        )
    try:
        value = int(str(seconds))
    except ValueError:
        raise InvalidRequest(
            "Invalid 'expires_after.seconds': expected an integer.", param="expires_after.seconds"
        ) from None
    if not MIN_EXPIRY <= value <= MAX_EXPIRY:
        raise InvalidRequest(
            f"Invalid 'expires_after.seconds': expected a value from {MIN_EXPIRY} to "
            f"{MAX_EXPIRY}, but got {value}.",
            param="expires_after.seconds",
        )
    return now + value


def _metadata(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidRequest("Invalid 'metadata': expected an object.", param="metadata")
    if len(value) > 16:
        raise InvalidRequest("Invalid 'metadata': at most 16 keys.", param="metadata")
    for key, item in value.items():
        if len(key) > 64 or not isinstance(item, str) or len(item) > 512:
            raise InvalidRequest(
                f"Invalid 'metadata.{key}': keys are at most 64 characters and values "
                "strings of at most 512.",
                param=f"metadata.{key}",
            )
    return value


class BatchApi:
    """The Files and Batches routes over one store, for one gateway."""

    def __init__(
        self, state: GatewayState, store: BatchStore, settings: Batches, runner: BatchRunner
    ) -> None:
        self.state = state
        self.store = store
        self.settings = settings
        self.runner = runner

    def routes(self) -> list[Route]:
        """The routes to mount."""
        handlers: list[tuple[str, list[str], Handler]] = [
            (FILES, ["POST"], self.upload),
            (FILES, ["GET"], self.list_files),
            (FILE, ["GET"], self.retrieve_file),
            (FILE, ["DELETE"], self.delete_file),
            (CONTENT, ["GET"], self.content),
            (BATCHES, ["POST"], self.create),
            (BATCHES, ["GET"], self.list_batches),
            (BATCH, ["GET"], self.retrieve),
            (CANCEL, ["POST"], self.cancel),
        ]
        by_path: dict[str, dict[str, Handler]] = {}
        for path, methods, handler in handlers:
            for method in methods:
                by_path.setdefault(path, {})[method] = handler
        return [
            Route(path, self._observed(path, table), methods=list(table))
            for path, table in by_path.items()
        ]

    def _observed(
        self, template: str, table: dict[str, Handler]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            state = self.state
            request_id = request_id_of(request.scope["headers"]).decode()
            exchange = Exchange(
                request.method, request.url.path, template, request_id, policed=False
            )
            state.observer.started(exchange)
            try:
                if state.authenticate is not None:
                    exchange.client, _ = state.authenticate(request.scope["headers"])
                authorization = request.headers.get("authorization", "").encode()
                owner = owner_of(exchange.client, authorization)
                response = await table[request.method](request, owner)
            except GatewayError as exc:
                exchange.error_code = exc.code
                response = Response(
                    render(exc),
                    status_code=exc.status,
                    headers=exc.headers,
                    media_type="application/json",
                )
            response.headers["x-request-id"] = request_id
            exchange.status = response.status_code
            exchange.bytes_out = len(response.body)
            state.observer.finished(exchange)
            return response

        return endpoint

    # Files.

    async def upload(self, request: Request, owner: str) -> Response:
        """POST /v1/files (multipart: ``file``, ``purpose``, ``expires_after``)."""
        limit = self.settings.max_file_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit + _CHUNK:
            raise BodyTooLarge(f"The file is larger than the gateway's limit of {limit} bytes.")
        try:
            form = await request.form(max_files=1, max_fields=8)
        except Exception as exc:  # python-multipart's and starlette's parse errors
            raise InvalidRequest(
                f"The upload is not a valid multipart/form-data body: {exc}.", param="file"
            ) from None
        try:
            upload = form.get("file")
            purpose = form.get("purpose")
            if not isinstance(upload, UploadFile):
                raise InvalidRequest(
                    "Missing required parameter: 'file'.",
                    param="file",
                    code="missing_required_parameter",
                )
            if purpose is None:
                raise InvalidRequest(
                    "Missing required parameter: 'purpose'.",
                    param="purpose",
                    code="missing_required_parameter",
                )
            if purpose not in PURPOSES:
                raise InvalidRequest(
                    f"Invalid value for 'purpose': '{purpose}'. This gateway keeps files for "
                    "the Batch API: 'batch'.",
                    param="purpose",
                )
            now = int(time.time())
            expires_at = _expiry(form, self.settings.file_ttl, now)
            content = bytearray()
            while chunk := await upload.read(_CHUNK):
                content += chunk
                if len(content) > limit:
                    raise BodyTooLarge(
                        f"The file is larger than the gateway's limit of {limit} bytes."
                    )
            record = FileRecord(
                id=new_id("file-"),
                owner=owner,
                filename=upload.filename or "upload.jsonl",
                purpose=str(purpose),
                bytes=len(content),
                created_at=now,
                expires_at=expires_at,
            )
        finally:
            await form.close()
        await self.store.put_file(record, bytes(content))
        return _json(record.api())

    async def list_files(self, request: Request, owner: str) -> Response:
        """GET /v1/files (``purpose``, ``after``, ``limit``, ``order``)."""
        purpose = request.query_params.get("purpose")
        files = [
            f.api()
            for f in await self.store.list_files(owner)
            if purpose is None or f.purpose == purpose
        ]
        return _json(page(files, request.query_params, default=10000, most=10000))

    async def _file(self, request: Request, owner: str) -> FileRecord:
        file_id = request.path_params["file_id"]
        record = await self.store.get_file(file_id, owner)
        if record is None:
            raise _file_not_found(file_id)
        return record

    async def retrieve_file(self, request: Request, owner: str) -> Response:
        """GET /v1/files/{file_id}."""
        return _json((await self._file(request, owner)).api())

    async def delete_file(self, request: Request, owner: str) -> Response:
        """DELETE /v1/files/{file_id}: a running batch keeps its own copy of its input."""
        file_id = request.path_params["file_id"]
        if not await self.store.delete_file(file_id, owner):
            raise _file_not_found(file_id)
        return _json({"id": file_id, "object": "file", "deleted": True})

    async def content(self, request: Request, owner: str) -> Response:
        """GET /v1/files/{file_id}/content."""
        file_id = request.path_params["file_id"]
        data = await self.store.read_file(file_id, owner)
        if data is None:
            raise _file_not_found(file_id)
        return Response(data, media_type="application/octet-stream")

    # Batches.

    async def _body(self, request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise InvalidRequest(
                "The request body is not valid JSON.", code="invalid_json"
            ) from None
        if not isinstance(body, dict):
            raise InvalidRequest("The request body must be a JSON object.", code="invalid_type")
        return body

    async def create(self, request: Request, owner: str) -> Response:
        """POST /v1/batches: the batch recorded, validating; the runner takes it on."""
        body = await self._body(request)
        for name in ("input_file_id", "endpoint", "completion_window"):
            if body.get(name) is None:
                raise InvalidRequest(
                    f"Missing required parameter: '{name}'.",
                    param=name,
                    code="missing_required_parameter",
                )
        endpoint = body["endpoint"]
        if endpoint not in ROUTES:
            raise InvalidRequest(
                f"Invalid value for 'endpoint': '{endpoint}'. Supported values are: "
                + ", ".join(f"'{path}'" for path in ROUTES)
                + ".",
                param="endpoint",
            )
        window = body["completion_window"]
        if window not in WINDOWS:
            raise InvalidRequest(
                f"Invalid value for 'completion_window': '{window}'. Supported values are: '24h'.",
                param="completion_window",
            )
        metadata = _metadata(body.get("metadata"))
        expires = body.get("output_expires_after")
        if expires is not None and (
            not isinstance(expires, dict)
            or expires.get("anchor") != "created_at"
            or not isinstance(expires.get("seconds"), int)
            or not MIN_EXPIRY <= expires["seconds"] <= MAX_EXPIRY
        ):
            raise InvalidRequest(
                'Invalid \'output_expires_after\': expected {"anchor": "created_at", '
                f'"seconds": {MIN_EXPIRY} to {MAX_EXPIRY}}}.',
                param="output_expires_after",
            )
        file_id = str(body["input_file_id"])
        record = await self.store.get_file(file_id, owner)
        if record is None:
            raise _file_not_found(file_id)
        if record.purpose != "batch":
            raise InvalidRequest(
                f"The file {file_id} has purpose '{record.purpose}'; a batch's input file "
                "must have purpose 'batch'.",
                param="input_file_id",
            )
        content = await self.store.read_file(file_id, owner)
        if content is None:
            raise _file_not_found(file_id)
        batch_id = new_id("batch_")
        batch = batch_object(
            batch_id,
            endpoint=endpoint,
            input_file_id=file_id,
            completion_window=window,
            metadata=metadata,
            created_at=int(time.time()),
        )
        client, profile = None, None
        if self.state.authenticate is not None:
            client, profile = self.state.authenticate(request.scope["headers"])
        doc = {
            "batch": batch,
            "owner": owner,
            "client": client,
            "profile": profile,
            "output_expires_after": expires,
            # Every line's span belongs to one trace: the batch's.
            "traceparent": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01",
        }
        await self.store.put_batch(doc, content)
        self.runner.nudge()
        return _json(batch)

    async def _batch(self, request: Request, owner: str) -> dict[str, Any]:
        batch_id = request.path_params["batch_id"]
        doc = await self.store.get_batch(batch_id)
        if doc is None or doc["owner"] != owner:
            raise _batch_not_found(batch_id)
        return await self._live(doc)

    async def _live(self, doc: dict[str, Any]) -> dict[str, Any]:
        """The Batch object with the counts recorded so far (while it runs)."""
        batch: dict[str, Any] = doc["batch"]
        if batch["status"] in UNFINISHED and batch["status"] != "validating":
            completed, failed = await self.store.counts(batch["id"])
            batch["request_counts"] = {
                **batch["request_counts"],
                "completed": completed,
                "failed": failed,
            }
        return batch

    async def retrieve(self, request: Request, owner: str) -> Response:
        """GET /v1/batches/{batch_id}."""
        return _json(await self._batch(request, owner))

    async def list_batches(self, request: Request, owner: str) -> Response:
        """GET /v1/batches (``after``, ``limit``), newest first."""
        batches = [await self._live(doc) for doc in await self.store.list_batches(owner)]
        return _json(page(batches, request.query_params))

    async def cancel(self, request: Request, owner: str) -> Response:
        """POST /v1/batches/{batch_id}/cancel: cancelling until its lines in flight end."""
        batch_id = request.path_params["batch_id"]
        ended = await cancel_batch(self.store, batch_id, owner)
        if ended is None:
            raise _batch_not_found(batch_id)
        self.runner.nudge()
        return _json(await self._live(ended))


async def cancel_batch(
    store: BatchStore, batch_id: str, owner: str | None
) -> dict[str, Any] | None:
    """Ask the batch's runner to stop it (``owner`` None: whoever's it is); its document
    after, None if there is none; InvalidRequest if it has ended."""
    refused: list[str] = []

    def cancelling(doc: dict[str, Any]) -> dict[str, Any] | None:
        if owner is not None and doc["owner"] != owner:
            return None
        batch = doc["batch"]
        if batch["status"] in ("validating", "in_progress", "finalizing"):
            if batch["status"] == "finalizing":
                return None  # every line is answered: it completes
            batch["status"] = "cancelling"
            batch["cancelling_at"] = int(time.time())
            return doc
        if batch["status"] != "cancelling":
            refused.append(batch["status"])
        return None

    doc = await store.update_batch(batch_id, cancelling)
    if doc is None or (owner is not None and doc["owner"] != owner):
        return None
    if refused:
        raise InvalidRequest(
            f"Cannot cancel a batch with status '{refused[0]}'.",
            param="batch_id",
            code="invalid_state",
        )
    return doc
