"""Files in and out of the rig: upload_file and download_file, inside the allowed directories.

Paths follow the ``save_dir`` policy (``deskrig.file_access``); larger files than the inline limit
go through the streamed ``/files`` HTTP endpoint (``deskrig.file_transfer``).
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from typing import Self
from urllib.parse import quote

import anyio
from pydantic import BaseModel, Field, model_validator

from deskrig.errors import DeskrigError, ErrorCode
from deskrig.file_access import FileFacts, FilePolicy, too_large
from deskrig.model import CText
from deskrig.services import AnyTool, CallInfo, ResourcePart, Services, ToolResult, ToolSpec

#: Where the streamed HTTP endpoint is, on the rig's HTTP port (bearer token as for /mcp).
FILES_ENDPOINT = "/files"


def file_policy(services: Services) -> FilePolicy:
    account = services.launcher.account
    app_owner = (account.uid, account.gid) if account is not None else None
    return FilePolicy(services.security.paths, services.settings.max_file_bytes, app_owner)


def files_url(path: str) -> str:
    return f"{FILES_ENDPOINT}?path={quote(path, safe='')}"


class UploadFileInput(BaseModel):
    path: CText = Field(description="Absolute or ~-rooted destination inside an allowed directory")
    content_base64: str | None = Field(None, description="The file's bytes, base64-encoded")
    text: str | None = Field(None, description="The file's contents as text (written as UTF-8)")
    make_parents: bool = Field(False, description="Create missing parent directories")

    @model_validator(mode="after")
    def _one_content(self) -> Self:
        if (self.content_base64 is None) == (self.text is None):
            raise ValueError("give exactly one of content_base64 and text")
        return self


class DownloadFileInput(BaseModel):
    path: CText = Field(description="Absolute or ~-rooted path of a file inside an allowed directory")


class DownloadResult(FileFacts):
    content_base64: str | None = Field(
        None, description="The bytes, base64-encoded; null when the file is larger than the inline limit"
    )
    mime_type: str = Field(description="Guessed from the file name")
    download_url: str | None = Field(
        None,
        description="For a file over the inline limit: GET this path on the rig's HTTP port with the "
        "bearer token (streamed)",
    )


def _decode(args: UploadFileInput, limit: int) -> bytes:
    if args.text is not None:
        return args.text.encode("utf-8")
    encoded = args.content_base64 or ""
    decoded_size = len(encoded) // 4 * 3 - encoded[-2:].count("=")
    if decoded_size > limit:  # refused before decoding a huge string
        raise too_large(decoded_size, limit, args.path)
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise DeskrigError(
            ErrorCode.INVALID_ARGUMENT,
            f"content_base64 is not valid base64: {exc}",
            details={"path": args.path},
            remediation="Send standard base64 (RFC 4648, with padding), or use text for text files.",
        ) from exc


async def upload_file(services: Services, call: CallInfo, args: UploadFileInput) -> ToolResult:
    policy = file_policy(services)
    data = _decode(args, policy.max_bytes)
    written = await anyio.to_thread.run_sync(policy.write, args.path, data, args.make_parents)
    return ToolResult(written)


async def download_file(services: Services, call: CallInfo, args: DownloadFileInput) -> ToolResult:
    policy = file_policy(services)
    found, real = await anyio.to_thread.run_sync(policy.read, args.path)
    mime_type = mimetypes.guess_type(real.name)[0] or "application/octet-stream"
    if found.size > services.settings.max_inline_bytes:
        url = files_url(found.path)
        return ToolResult(DownloadResult(**found.model_dump(), mime_type=mime_type, download_url=url))
    data = await anyio.Path(real).read_bytes()
    result = DownloadResult(
        **found.model_dump(), mime_type=mime_type, content_base64=base64.b64encode(data).decode("ascii")
    )
    return ToolResult(result, resources=[ResourcePart(real.as_uri(), data, mime_type)])


TOOLS: list[AnyTool] = [
    ToolSpec(
        "upload_file",
        "Write a file on the rig (bytes as content_base64, or text) inside the allowed directories, "
        "atomically: readers see the old file or the new one. Returns path, size and sha256. Files "
        "over the inline limit: PUT them to /files?path=... on the rig's HTTP port instead.",
        UploadFileInput,
        FileFacts,
        upload_file,
        read_only=False,
        recorded=False,
        title="Upload a file",
    ),
    ToolSpec(
        "download_file",
        "Read a file on the rig inside the allowed directories: path, size, sha256 and the bytes "
        "(base64 and as an embedded resource). Over the inline limit, only download_url (streamed "
        "GET with the bearer token).",
        DownloadFileInput,
        DownloadResult,
        download_file,
        title="Download a file",
    ),
]
