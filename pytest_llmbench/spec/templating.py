"""Prompt templates: ``{{var}}`` placeholders, chats rendered from them, and their text.

An eval file's prompts, system prompts and messages are templates; a case's ``vars`` (or a
dataset row's columns) fill them. :func:`render_template` renders one text, :func:`render_chat`
a whole chat (with multiple choice options added where the template does not place them), and
the optimizer checks rewrites against :data:`TEMPLATE_VAR`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..yamlguard import json_text

TEMPLATE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")


def last_user_text(messages: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The text of the last user message (image parts left out), or None."""
    for message in reversed(messages or ()):
        if message.get("role") == "user":
            return None if message.get("content") is None else message_text(message)
    return None


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text: its content, or the text parts of a content list (images left out)."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


class TemplateKeyError(ValueError):
    """A placeholder without a value in message ``index`` of a template."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def render_chat(
    template: Sequence[Mapping[str, str]],
    variables: dict[str, Any] | None,
    choices: tuple[str, ...] | None = None,
) -> tuple[dict[str, str], ...]:
    """Render every message of ``template`` with ``variables``.

    Multiple choice options are the ``{{choices}}`` variable (lettered lines); a template that
    does not place them gets them, with an instruction, after the last user message. Raises
    ValueError (a ``TemplateKeyError``) for an unknown placeholder.
    """
    if choices is not None and variables is not None:
        from ..scoring import format_choices

        # The lettered options win over a dataset column of the same name: they are what the
        # answer is read against.
        variables = {**variables, "choices": format_choices(choices)}
    placed = any("choices" in placeholders(m["content"]) for m in template)
    rendered: list[dict[str, str]] = []
    for index, message in enumerate(template):
        try:
            content = render_template(message["content"], variables)
        except ValueError as exc:
            raise TemplateKeyError(index, str(exc)) from None
        rendered.append({"role": message["role"], "content": content})
    if choices is not None and not (placed and variables is not None):
        from ..scoring import choice_prompt

        last = max(i for i, m in enumerate(rendered) if m["role"] == "user")
        rendered[last] = {
            "role": "user",
            "content": choice_prompt(rendered[last]["content"], choices),
        }
    return tuple(rendered)


def placeholders(text: str) -> set[str]:
    return {match.group(1) for match in TEMPLATE_VAR.finditer(text)}


def render_template(text: str, variables: dict[str, Any] | None) -> str:
    """Replace ``{{name}}`` placeholders; an unknown name is an error, not an empty string.

    ``{{a.b}}`` and ``{{a.0}}`` reach into mappings and lists; mappings and lists render as
    JSON. ``variables=None`` means the text is not a template and is returned unchanged.
    """
    if variables is None:
        return text

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        try:
            value = _lookup(variables, name)
        except KeyError:
            known = ", ".join(sorted(map(str, variables))) or "none"
            raise ValueError(f"unknown template variable {name!r} (known: {known})") from None
        return value if isinstance(value, str) else _as_text(name, value)

    return TEMPLATE_VAR.sub(replace, text)


def _lookup(variables: dict[str, Any], name: str) -> Any:
    """``variables[name]``, else a walk down the dotted parts of ``name``; KeyError if absent."""
    if name in variables:
        return variables[name]
    value: Any = variables
    for part in name.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(name)
    return value


def _as_text(name: str, value: Any) -> str:
    """A value that is no string, as text; a mapping or a list as JSON. One that holds itself,
    nests too deep or holds what JSON cannot is a ValueError naming the variable."""
    if not isinstance(value, (dict, list)):
        return str(value)
    try:
        return json_text(value)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"template variable {name!r}: {exc}") from None
