"""Files the fake Telegram server knows: registered by tests, sent by users, uploaded by the bot.

``getFile`` answers with a ``file_path``; the bytes are served at
``/file/bot<TOKEN>/<file_path>``. Like Telegram, getFile refuses files over 20 MB.
"""

from __future__ import annotations

import itertools
import mimetypes
import secrets

from tests.fake_telegram.records import StoredFile
from tests.fake_telegram.wire import Json, Upload, bad_request

MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024


class FileStore:
    """Files by id and by download path. Not thread-safe: used under the server lock."""

    def __init__(self) -> None:
        self._numbers = itertools.count(1)
        self._by_id: dict[str, StoredFile] = {}
        self._by_path: dict[str, StoredFile] = {}

    def add(
        self,
        data: bytes,
        *,
        folder: str = "documents",
        file_name: str | None = None,
        mime_type: str | None = None,
        file_size: int | None = None,
    ) -> StoredFile:
        """Register bytes; ``file_size`` overrides the reported size (for the 20 MB limit)."""
        number = next(self._numbers)
        suffix = ""
        if file_name and "." in file_name:
            suffix = "." + file_name.rsplit(".", 1)[1]
        elif mime_type:
            suffix = mimetypes.guess_extension(mime_type) or ""
        stored = StoredFile(
            file_id=f"BQACAgQAAx{number:04d}{secrets.token_hex(8)}",
            file_unique_id=f"AgAD{number:04d}",
            file_path=f"{folder}/file_{number}{suffix}",
            data=data,
            file_size=len(data) if file_size is None else file_size,
            file_name=file_name,
            mime_type=mime_type,
        )
        self._by_id[stored.file_id] = stored
        self._by_path[stored.file_path] = stored
        return stored

    def get(self, file_id: str) -> StoredFile:
        """A file by id, or Telegram's error for an unknown one."""
        stored = self._by_id.get(file_id)
        if stored is None:
            raise bad_request("invalid file_id")
        return stored

    def by_path(self, path: str) -> StoredFile | None:
        """The file served at ``path``, if any."""
        return self._by_path.get(path)

    def get_file(self, params: Json, uploads: dict[str, Upload]) -> Json:
        """``getFile``: the File object with its download path."""
        file_id = params.get("file_id")
        if not file_id:
            raise bad_request("file_id is empty")
        stored = self.get(str(file_id))
        if stored.file_size > MAX_DOWNLOAD_BYTES:
            raise bad_request("file is too big")
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": stored.file_size,
            "file_path": stored.file_path,
        }


def media_json(kind: str, stored: StoredFile, duration: int = 0) -> Json:
    """The message fields for a document, a photo (one size; the fake does not resize) or
    a voice message (``duration`` as the bot gave it)."""
    if kind == "voice":
        fields = {k: v for k, v in stored.describe().items() if k != "file_name"}
        return {"voice": {**fields, "duration": duration}}
    if kind == "photo":
        size = {k: v for k, v in stored.describe().items() if k not in ("file_name", "mime_type")}
        return {"photo": [{**size, "width": 320, "height": 320}]}
    return {"document": stored.describe()}
