"""Images sent with a case's prompt: checking references, OpenAI content parts, model support.

A case's ``images:`` are local files (relative to the eval file), ``http(s)://`` URLs or
``data:image/...;base64,`` URLs. Local files are checked at collection (present, a PNG, JPEG,
GIF or WEBP by their first bytes, at most :data:`MAX_IMAGE_BYTES`) and read at call time into
base64 data URLs; URLs go to the provider as they are. litellm translates OpenAI's
``image_url`` content parts for the other providers.

Nothing here imports litellm at module import; :func:`vision_support` loads it only when it is
already loaded or the model is in its price map.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from .paths import PathRefused, resolve_eval_path

if TYPE_CHECKING:
    from ..models import ModelProfile

#: The largest image accepted, as most providers cap one image (OpenAI: 20 MB).
MAX_IMAGE_BYTES = 20 * 1024 * 1024
#: Image types every vision provider takes, by MIME type; the first bytes tell them apart.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_TYPE_NAMES = "PNG, JPEG, GIF or WEBP"
#: Bytes needed to recognise every type in :data:`IMAGE_TYPES`.
_MAGIC_BYTES = 12
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_DATA_URL = re.compile(r"^data:(?P<header>[^,]*),(?P<payload>.*)$", re.DOTALL)


class ImageError(ValueError):
    """An image reference that cannot be sent; the message is one line and names the ref."""


def check_image_ref(ref: str, base_dir: Path, roots: Sequence[Path] = ()) -> str:
    """Check one ``images:`` entry at collection; return the URL, or the file's absolute path.

    A relative path is taken from ``base_dir`` (the eval file's folder); a file must be inside
    ``base_dir`` or ``roots`` and not a special file (:mod:`.paths`). Raises
    :class:`ImageError` for a missing, unreadable, too large or non-image file, a malformed
    data URL, or a URL scheme other than http(s).
    """
    if not ref.strip():
        raise ImageError("empty image reference")
    if ref.startswith("data:"):
        _data_url_bytes(ref)
        return ref
    if _URL_SCHEME.match(ref):
        _check_http_url(ref)
        return ref
    try:
        path = resolve_eval_path(str(Path(ref).expanduser()), base_dir, roots)
    except PathRefused as exc:
        raise ImageError(str(exc)) from None
    _check_file(ref, path)
    return str(path)


def image_part(ref: str) -> dict[str, Any]:
    """The OpenAI content part that sends ``ref``: a URL as it is, a local file as a data URL."""
    return {"type": "image_url", "image_url": {"url": _image_url(ref)}}


def attach_images(messages: Sequence[dict[str, Any]], refs: Sequence[str]) -> list[dict[str, Any]]:
    """``messages`` with ``refs`` sent as image parts of the last user message.

    That message's text becomes the first part, ``{"type": "text", "text": ...}`` (an empty text
    is left out, as some providers refuse empty text blocks). Other messages are the same
    objects; the input is not changed. A chat with no user message gets one holding the images.
    """
    if not refs:
        return list(messages)
    parts = [image_part(ref) for ref in refs]
    chat = list(messages)
    for index in range(len(chat) - 1, -1, -1):
        if chat[index].get("role") == "user":
            content = [*_content_parts(chat[index].get("content")), *parts]
            chat[index] = {**chat[index], "content": content}
            return chat
    chat.append({"role": "user", "content": parts})
    return chat


def describe_ref(ref: str, root: Path | None = None) -> str:
    """``ref`` as a record or report shows it: never the image bytes, never URL credentials.

    A data URL becomes ``data:image/png;base64,... (N bytes)``; an http(s) URL loses its user
    info and query string (signed URLs carry their signature there); a local path under
    ``root`` is shown relative to it.
    """
    match = _DATA_URL.match(ref) if ref.startswith("data:") else None
    if match is not None:
        header, payload = match["header"], match["payload"]
        if header.endswith(";base64"):
            return f"data:{header},... ({_base64_size(payload)} bytes)"
        return f"data:{header},... ({len(payload)} chars)"
    if _URL_SCHEME.match(ref):
        parts = urlsplit(ref)
        host = parts.netloc.rpartition("@")[2]
        shown = urlunsplit((parts.scheme, host, parts.path, "", ""))
        return f"{shown}?..." if parts.query else shown
    if root is not None:
        try:
            return Path(ref).relative_to(root).as_posix()
        except ValueError:
            pass
    return ref


def vision_support(profile: ModelProfile) -> bool | None:
    """Whether ``profile``'s model takes images: True, False, or None when nobody knows.

    The profile's ``vision:`` wins. Else litellm's model map answers for a model it lists with a
    ``supports_vision`` flag, read as data (never litellm's import, seconds). An entry without
    the flag is unknown rather than False: the map leaves it out for some vision models
    (``ollama/llava``).
    """
    declared = getattr(profile, "vision", None)
    if declared is not None:
        return bool(declared)
    from ..models import supports_vision

    return supports_vision(profile.model)


def unsupported_message(profile: ModelProfile) -> str:
    """Why ``profile`` gets no images, for an item that has some."""
    if getattr(profile, "vision", None) is False:
        return f"{profile.name} does not accept images (profile vision: false)"
    return (
        f"{profile.name} does not accept images "
        f"(litellm's model map: {profile.model} has supports_vision: false)"
    )


def sniff_image_type(head: bytes) -> str | None:
    """The MIME type in :data:`IMAGE_TYPES` that ``head`` (a file's first bytes) starts, if any."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _image_url(ref: str) -> str:
    if ref.startswith("data:") or _URL_SCHEME.match(ref):
        return ref
    path = Path(ref)
    _check_size(ref, path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"image {ref!r} cannot be read: {exc.strerror or exc}") from None
    mime = _sniffed(ref, data)
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _check_file(ref: str, path: Path) -> None:
    """A local image: present, not too large, an image by its first bytes."""
    _check_size(ref, path)
    try:
        with path.open("rb") as handle:
            head = handle.read(_MAGIC_BYTES)
    except OSError as exc:
        raise ImageError(f"image {ref!r} cannot be read: {exc.strerror or exc}") from None
    _sniffed(ref, head)


def _check_size(ref: str, path: Path) -> None:
    if not path.is_file():
        what = "is not a file" if path.exists() else "not found"
        raise ImageError(f"image {ref!r} {what} (looked for {path})")
    size = path.stat().st_size
    if size > MAX_IMAGE_BYTES:
        raise ImageError(f"image {ref!r} is {_megabytes(size)}; the limit is {_limit()}")


def _sniffed(ref: str, head: bytes) -> str:
    mime = sniff_image_type(head)
    if mime is None:
        raise ImageError(f"image {ref!r} is not a {_TYPE_NAMES} file")
    return mime


def _check_http_url(ref: str) -> None:
    parts = urlsplit(ref)
    shown = describe_ref(ref)
    if parts.scheme.lower() not in ("http", "https"):
        raise ImageError(
            f"image {shown!r}: only http(s) and data URLs are sent, not {parts.scheme}://"
        )
    if not parts.hostname:
        raise ImageError(f"image {shown!r}: the URL has no host")


def _data_url_bytes(ref: str) -> bytes:
    """The image inside a ``data:image/...;base64,`` URL, checked against its declared type."""
    shown = describe_ref(ref)
    match = _DATA_URL.match(ref)
    if match is None:
        raise ImageError(f"image {shown!r}: a data URL needs a ',' before its data")
    header = match["header"].lower()
    declared = header.split(";", 1)[0]
    if not header.endswith(";base64"):
        raise ImageError(
            f"image {shown!r}: only base64 data URLs are sent (data:image/...;base64,)"
        )
    declared = "image/jpeg" if declared == "image/jpg" else declared
    if declared not in IMAGE_TYPES:
        raise ImageError(f"image {shown!r}: {declared or 'no type'} is not a {_TYPE_NAMES} type")
    if _base64_size(match["payload"]) > MAX_IMAGE_BYTES:  # before decoding it all
        size = _base64_size(match["payload"])
        raise ImageError(f"image {shown!r} is {_megabytes(size)}; the limit is {_limit()}")
    try:
        data = base64.b64decode(match["payload"], validate=True)
    except (binascii.Error, ValueError):
        raise ImageError(f"image {shown!r}: the data is not valid base64") from None
    found = sniff_image_type(data[:_MAGIC_BYTES])
    if found is None:
        raise ImageError(f"image {shown!r}: the data is not a {_TYPE_NAMES} image")
    if found != declared:
        raise ImageError(f"image {shown!r}: the URL says {declared} but the data is {found}")
    return data


def _content_parts(content: Any) -> list[Any]:
    """A message's content as a list of content parts (text first)."""
    if content is None or content == "":
        return []
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": str(content)}]


@functools.lru_cache(maxsize=1)
def _base64_size(payload: str) -> int:
    payload = payload.strip()
    return len(payload) * 3 // 4 - payload[-2:].count("=")


def _megabytes(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB"


def _limit() -> str:
    return f"{MAX_IMAGE_BYTES / 1024 / 1024:g} MB"
