"""Images with a prompt: reference checks, OpenAI content parts, model support, the wire."""

from __future__ import annotations

import asyncio
import base64
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeLLMServer

from pytest_llmbench.models.profiles import ModelProfile
from pytest_llmbench.models.providers import prices
from pytest_llmbench.models.providers.completion import CallTarget
from pytest_llmbench.spec import images as vision
from pytest_llmbench.spec.images import (
    ImageError,
    attach_images,
    check_image_ref,
    describe_ref,
    image_part,
    unsupported_message,
    vision_support,
)


def _png_1x1() -> bytes:
    """A real 1x1 red PNG: signature, IHDR, IDAT, IEND with their CRCs."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then one red pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


#: Small real images, one per accepted type (`file` names each of them).
IMAGES = {
    "png": _png_1x1(),
    "jpg": base64.b64decode(
        "/9j/2wBDAAMCAgICAgMCAgIDAwMDBAYEBAQEBAgGBgUGCQgKCgkICQkKDA8MCgsOCwkJDRENDg8QEBEQCgwSEx"
        "IQEw8QEBD/yQALCAABAAEBAREA/8wABgAQEAX/2gAIAQEAAD8A0s8g/9k="
    ),
    "gif": base64.b64decode("R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw=="),
    "webp": base64.b64decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA=="),
}
MIME = {"png": "image/png", "jpg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


def _data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _profile(vision_flag: bool | None = None, **fields: Any) -> ModelProfile:
    fields.setdefault("name", "local/smollm2")
    fields.setdefault("model", "openai/smollm2")
    if "vision" in ModelProfile.model_fields:
        return ModelProfile(**fields, vision=vision_flag)
    # Until ModelProfile has its `vision` field, set the attribute past the frozen check.
    profile = ModelProfile(**fields)
    object.__setattr__(profile, "vision", vision_flag)
    return profile


# -- check_image_ref: local files --


@pytest.mark.parametrize("suffix", sorted(IMAGES))
def test_each_image_type_is_accepted_and_resolved(tmp_path: Path, suffix: str) -> None:
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / f"cat.{suffix}").write_bytes(IMAGES[suffix])
    checked = check_image_ref(f"pics/cat.{suffix}", tmp_path)
    assert checked == str(tmp_path.resolve() / "pics" / f"cat.{suffix}")
    assert Path(checked).is_absolute()


def test_type_comes_from_bytes_not_name(tmp_path: Path) -> None:
    (tmp_path / "photo.bin").write_bytes(IMAGES["jpg"])
    assert check_image_ref("photo.bin", tmp_path).endswith("photo.bin")
    assert image_part(str(tmp_path / "photo.bin"))["image_url"]["url"].startswith(
        "data:image/jpeg;base64,"
    )


def test_absolute_path_ignores_base_dir(tmp_path: Path) -> None:
    image = tmp_path / "a.png"
    image.write_bytes(IMAGES["png"])
    checked = check_image_ref(str(image), tmp_path / "elsewhere", [tmp_path])
    assert checked == str(image.resolve())


def test_text_file_named_png_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.png").write_text("not really a picture\n")
    with pytest.raises(ImageError) as info:
        check_image_ref("notes.png", tmp_path)
    assert str(info.value) == "image 'notes.png' is not a PNG, JPEG, GIF or WEBP file"


def test_missing_file_is_refused_with_the_place_looked(tmp_path: Path) -> None:
    with pytest.raises(ImageError) as info:
        check_image_ref("pics/gone.png", tmp_path)
    message = str(info.value)
    assert message.startswith("image 'pics/gone.png' not found (looked for ")
    assert str(tmp_path.resolve() / "pics" / "gone.png") in message
    assert "\n" not in message


def test_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pics").mkdir()
    with pytest.raises(ImageError, match=r"image 'pics' is not a file"):
        check_image_ref("pics", tmp_path)


def test_too_large_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vision, "MAX_IMAGE_BYTES", 2 * 1024 * 1024)
    big = IMAGES["png"] + b"\x00" * (3 * 1024 * 1024)
    (tmp_path / "big.png").write_bytes(big)
    (tmp_path / "fits.png").write_bytes(IMAGES["png"] + b"\x00" * (2 * 1024 * 1024 - 100))
    with pytest.raises(ImageError) as info:
        check_image_ref("big.png", tmp_path)
    assert str(info.value) == "image 'big.png' is 3.0 MB; the limit is 2 MB"
    assert check_image_ref("fits.png", tmp_path).endswith("fits.png")
    with pytest.raises(ImageError, match="the limit is 2 MB"):
        image_part(str(tmp_path / "big.png"))


def test_empty_ref_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="empty image reference"):
        check_image_ref("  ", tmp_path)


# -- check_image_ref: URLs --


@pytest.mark.parametrize(
    "url", ["https://example.com/cat.png", "http://127.0.0.1:8000/img?id=3", "HTTPS://EX.COM/a"]
)
def test_http_urls_are_kept_as_they_are(tmp_path: Path, url: str) -> None:
    assert check_image_ref(url, tmp_path) == url
    assert image_part(url) == {"type": "image_url", "image_url": {"url": url}}


@pytest.mark.parametrize(
    ("mime", "suffix"),
    [*((MIME[suffix], suffix) for suffix in sorted(IMAGES)), ("image/jpg", "jpg")],
)
def test_valid_data_url_is_kept(tmp_path: Path, mime: str, suffix: str) -> None:
    url = _data_url(mime, IMAGES[suffix])  # image/jpg: an alias that is accepted too
    assert check_image_ref(url, tmp_path) == url
    assert image_part(url)["image_url"]["url"] == url


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/cat.png", "only http(s) and data URLs are sent, not ftp://"),
        ("file:///tmp/cat.png", "only http(s) and data URLs are sent, not file://"),
        ("https:///cat.png", "the URL has no host"),
        ("data:image/png;base64,###not-base64###", "the data is not valid base64"),
        ("data:image/png;base64,", "the data is not a PNG, JPEG, GIF or WEBP image"),
        (_data_url("image/png", b"hello, world"), "the data is not a PNG, JPEG, GIF or WEBP"),
        (
            _data_url("image/png", IMAGES["jpg"]),
            "the URL says image/png but the data is image/jpeg",
        ),
        (_data_url("image/bmp", IMAGES["png"]), "image/bmp is not a PNG, JPEG, GIF or WEBP type"),
        (_data_url("text/plain", IMAGES["png"]), "text/plain is not a PNG"),
        ("data:image/png,rawbytes", "only base64 data URLs are sent"),
        ("data:image/png;base64", "a data URL needs a ',' before its data"),
    ],
)
def test_other_urls_and_invalid_data_urls_are_refused(tmp_path: Path, url: str, why: str) -> None:
    with pytest.raises(ImageError) as info:
        check_image_ref(url, tmp_path)
    assert why in str(info.value)
    assert "\n" not in str(info.value)


def test_data_url_error_does_not_quote_the_payload(tmp_path: Path) -> None:
    url = _data_url("image/png", b"x" * 3000)
    with pytest.raises(ImageError) as info:
        check_image_ref(url, tmp_path)
    assert str(info.value).startswith("image 'data:image/png;base64,... (3000 bytes)'")
    assert len(str(info.value)) < 200


def test_too_large_data_url_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vision, "MAX_IMAGE_BYTES", 1024 * 1024)
    url = _data_url("image/png", IMAGES["png"] + b"\x00" * (2 * 1024 * 1024))
    with pytest.raises(ImageError, match=r"is 2\.0 MB; the limit is 1 MB"):
        check_image_ref(url, tmp_path)


# -- image_part and attach_images --


@pytest.mark.parametrize("suffix", sorted(IMAGES))
def test_local_file_becomes_a_data_url_with_its_type(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"x.{suffix}"
    path.write_bytes(IMAGES[suffix])
    part = image_part(str(path))
    assert part == {
        "type": "image_url",
        "image_url": {"url": _data_url(MIME[suffix], IMAGES[suffix])},
    }
    _header, payload = part["image_url"]["url"].split(",", 1)
    assert base64.b64decode(payload) == IMAGES[suffix]


def test_image_part_of_a_file_gone_since_collection(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="not found"):
        image_part(str(tmp_path / "gone.png"))


def test_attach_images_builds_openai_content_parts(tmp_path: Path) -> None:
    png = tmp_path / "a.png"
    png.write_bytes(IMAGES["png"])
    system = {"role": "system", "content": "Be brief."}
    first = {"role": "user", "content": "Hello"}
    answer = {"role": "assistant", "content": "Hi."}
    last = {"role": "user", "content": "What is in these pictures?"}
    messages = [system, first, answer, last]
    url = "https://example.com/dog.jpg"
    sent = attach_images(messages, [str(png), url])
    assert sent == [
        system,
        first,
        answer,
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these pictures?"},
                {"type": "image_url", "image_url": {"url": _data_url("image/png", IMAGES["png"])}},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        },
    ]
    assert sent[0] is system and sent[1] is first and sent[2] is answer
    assert last == {"role": "user", "content": "What is in these pictures?"}  # not changed
    assert messages == [system, first, answer, last]


def test_attach_images_targets_the_last_user_message_not_the_last_message() -> None:
    url = "https://example.com/a.png"
    messages = [{"role": "user", "content": "Describe it."}, {"role": "assistant", "content": "A"}]
    sent = attach_images(messages, [url])
    assert sent[0]["content"] == [
        {"type": "text", "text": "Describe it."},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    assert sent[1] is messages[1]


def test_attach_images_without_refs_changes_nothing() -> None:
    messages = [{"role": "user", "content": "Hi"}]
    sent = attach_images(messages, [])
    assert sent == messages
    assert sent[0] is messages[0]


def test_attach_images_keeps_existing_parts_and_drops_empty_text() -> None:
    url = "https://example.com/a.png"
    parts = [{"type": "text", "text": "one"}]
    assert attach_images([{"role": "user", "content": parts}], [url])[0]["content"] == [
        {"type": "text", "text": "one"},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    assert attach_images([{"role": "user", "content": ""}], [url])[0]["content"] == [
        {"type": "image_url", "image_url": {"url": url}}
    ]


def test_attach_images_without_a_user_message_adds_one() -> None:
    url = "https://example.com/a.png"
    system = {"role": "system", "content": "Describe images."}
    assert attach_images([system], [url]) == [
        system,
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]},
    ]


# -- describe_ref --


def test_describe_ref_never_shows_image_bytes() -> None:
    data = IMAGES["png"] + b"\x00" * 1000
    shown = describe_ref(_data_url("image/png", data))
    assert shown == f"data:image/png;base64,... ({len(data)} bytes)"
    assert describe_ref("data:image/png,abc") == "data:image/png,... (3 chars)"


def test_describe_ref_drops_url_credentials_and_query() -> None:
    signed = (
        "https://user:pw@bucket.s3.amazonaws.com/cat.png?X-Amz-Signature=abc123&X-Amz-Expires=60"
    )
    assert describe_ref(signed) == "https://bucket.s3.amazonaws.com/cat.png?..."
    assert describe_ref("https://example.com/cat.png") == "https://example.com/cat.png"


def test_describe_ref_paths(tmp_path: Path) -> None:
    inside = str(tmp_path / "evals" / "pics" / "cat.png")
    assert describe_ref(inside) == inside
    assert describe_ref(inside, root=tmp_path) == "evals/pics/cat.png"
    assert describe_ref("/elsewhere/cat.png", root=tmp_path) == "/elsewhere/cat.png"


def test_url_errors_do_not_show_the_query(tmp_path: Path) -> None:
    with pytest.raises(ImageError) as info:
        check_image_ref("ftp://example.com/a.png?token=SECRET123", tmp_path)
    assert "SECRET123" not in str(info.value)


# -- vision_support and unsupported_message --


@pytest.mark.parametrize("flag", [True, False])
def test_profile_vision_wins(flag: bool) -> None:
    # gpt-4o supports vision in litellm's map; the profile's word is final.
    profile = _profile(flag, name="mini", model="openai/gpt-4o")
    assert vision_support(profile) is flag


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("openai/gpt-4o", True),  # in the map with supports_vision: true
        ("gpt-4o-mini", True),
        ("openai/o3-mini", False),  # supports_vision: false
        ("openai/gpt-3.5-turbo", None),  # mapped, but without the flag: unknown
        ("openai/fake-model", None),  # not in the map
        ("hosted_vllm/my-llava", None),
    ],
)
def test_litellm_map_answers_when_the_profile_does_not(
    litellm_loaded: Any, model: str, expected: bool | None
) -> None:
    assert vision_support(_profile(None, name="m", model=model)) is expected


def test_price_map_is_read_without_importing_litellm() -> None:
    assert prices.model_info("openai/gpt-4o") is not None
    assert prices.model_info("bedrock/converse/us.amazon.nova-pro-v1:0") is not None
    assert prices.model_info("openai/fake-model") is None


def test_vision_support_does_not_import_litellm() -> None:
    code = (
        "import sys\n"
        "from pytest_llmbench.models.profiles import ModelProfile\n"
        "from pytest_llmbench.spec.images import vision_support\n"
        "print(vision_support(ModelProfile(name='x', model='openai/no-such-model-here')))\n"
        "print(vision_support(ModelProfile(name='y', model='openai/gpt-4o')))\n"
        "print('litellm' in sys.modules)\n"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split() == ["None", "True", "False"]


def test_unsupported_messages() -> None:
    declared = _profile(False)
    assert unsupported_message(declared) == (
        "local/smollm2 does not accept images (profile vision: false)"
    )
    mapped = _profile(None, name="o3", model="openai/o3-mini")
    assert unsupported_message(mapped) == (
        "o3 does not accept images (litellm's model map: openai/o3-mini has supports_vision: false)"
    )


# -- on the wire --


def test_images_reach_the_provider_intact(
    tmp_path: Path, fake_llm: FakeLLMServer, litellm_loaded: Any
) -> None:
    from pytest_llmbench.models.providers.calls import acomplete

    png = tmp_path / "chart.png"
    png.write_bytes(IMAGES["png"])
    url = "https://example.com/photo.webp"
    messages = attach_images(
        [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "Color?"},
        ],
        [check_image_ref("chart.png", tmp_path), url],
    )
    target = CallTarget("fake", "openai/fake-model", fake_llm.base_url, "sk-test-vision-key")
    completion = asyncio.run(acomplete(target, messages, {}, max_retries=0))
    assert completion.text == "ok"
    (request,) = fake_llm.chat_requests()
    sent = request.body["messages"]
    assert sent[0] == {"role": "system", "content": "Answer in one word."}
    assert sent[1]["role"] == "user"
    assert sent[1]["content"] == [
        {"type": "text", "text": "Color?"},
        {"type": "image_url", "image_url": {"url": _data_url("image/png", IMAGES["png"])}},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    payload = sent[1]["content"][1]["image_url"]["url"].split(",", 1)[1]
    assert base64.b64decode(payload) == png.read_bytes()
