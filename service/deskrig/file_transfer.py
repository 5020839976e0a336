"""Streamed HTTP file transfer: ``GET /files?path=`` and ``PUT /files?path=``, for files over the
inline limit of upload_file/download_file.

Behind the same bearer token and Host check as ``/mcp`` (``deskrig.guard``), with the same path
policy and size limit as the tools (``deskrig.file_access``). An upload is streamed into a temp
file beside its destination and renamed into place once complete: a body over the limit, or a
client that goes away, leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import iterate_in_threadpool

from deskrig.error_responses import http_error
from deskrig.errors import DeskrigError, file_system_error
from deskrig.file_access import FileFacts, kept_mode, read_chunks, replace_with, too_large
from deskrig.files import write_temp
from deskrig.server import DeskrigServer
from deskrig.tools.files import FILES_ENDPOINT, file_policy


async def _receive_into(request: Request, temp: Path, limit: int, path: str) -> FileFacts:
    """Stream the request body into ``temp``, refusing past ``limit`` bytes."""
    digest = hashlib.sha256()
    size = 0
    async with await anyio.open_file(temp, "wb") as out:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(size, limit, path)
            digest.update(chunk)
            await out.write(chunk)
    return FileFacts(path=path, size=size, sha256=digest.hexdigest())


def files_router(server: DeskrigServer) -> APIRouter:
    router = APIRouter()
    policy = file_policy(server.services)

    @router.get(FILES_ENDPOINT, response_model=None)
    async def download(path: str) -> Response:
        """The file's bytes, streamed; X-Sha256 and Content-Length say what to expect."""
        try:
            found, real = await anyio.to_thread.run_sync(policy.read, path)
        except DeskrigError as exc:
            return http_error(exc.info())
        return StreamingResponse(
            iterate_in_threadpool(read_chunks(real)),
            media_type="application/octet-stream",
            headers={"Content-Length": str(found.size), "X-Sha256": found.sha256},
        )

    @router.put(FILES_ENDPOINT, response_model=None)
    async def upload(request: Request, path: str, make_parents: bool = False) -> JSONResponse:
        """The request body becomes the file at ``path``, atomically; answers ``{path, size, sha256}``."""
        try:
            declared = int(request.headers.get("content-length") or 0)
            if declared > policy.max_bytes:
                raise too_large(declared, policy.max_bytes, path)
            real = await anyio.to_thread.run_sync(policy.destination, path, make_parents)
            try:
                temp = await anyio.to_thread.run_sync(
                    write_temp, real.parent, b"", kept_mode(real), policy.owner_of(real)
                )
            except OSError as exc:
                raise file_system_error("write", real, exc) from exc
            try:
                received = await _receive_into(request, temp, policy.max_bytes, str(real))
            except BaseException:
                os.unlink(temp)
                raise
            await anyio.to_thread.run_sync(replace_with, temp, real)
        except DeskrigError as exc:
            return http_error(exc.info())
        return JSONResponse(received.model_dump(mode="json"))

    return router
