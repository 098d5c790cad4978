"""Function definitions offered through the tool shim: a model without native tool calling
gets the tools and the protocol in its system message, and its JSON reply is read back as
native tool calls. Whether a kind may shim at all is the kind's
(:attr:`.case_kind.CaseKind.shimmable`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...models import Completion
    from ..plan import CallPlan


def shim_offered(plan: CallPlan) -> bool:
    """Whether ``plan``'s file offers its function definitions through the tool shim for its
    model."""
    functions = plan.functions
    return functions is not None and functions.shimmed(plan.model.embedded)


def shim_request(
    plan: CallPlan, messages: Sequence[dict[str, Any]]
) -> tuple[tuple[dict[str, Any], ...], dict[str, Any]]:
    """The messages and parameters of a shimmed function-calling call: the tools and the
    protocol in the system message, its JSON shapes as the response format (no ``tools``)."""
    from ...agent import calls_response_format, with_shim_prompt

    functions = plan.functions
    assert functions is not None
    schemas = [tool.as_openai() for tool in functions.tools]
    shown = tuple(with_shim_prompt(messages, schemas, calls=True))
    names, must_call = functions.names, functions.tool_choice not in (None, "auto", "none")
    if functions.tool_choice == "none":
        names = ()  # the grammar then leaves only the answer
    elif isinstance(functions.tool_choice, Mapping):
        names = (str(functions.tool_choice["function"]["name"]),)
    formatted = calls_response_format(names, schemas, answer_allowed=not must_call)
    return shown, {"response_format": formatted}


def read_shim(completion: Completion) -> Completion:
    """A shimmed reply read as a native one: its protocol calls as ``tool_calls``, the text
    its answer ("" when it called)."""
    from ...agent import parse_calls_reply

    calls, answer = parse_calls_reply(completion.text)
    return dataclasses.replace(completion, text=answer, tool_calls=calls)
