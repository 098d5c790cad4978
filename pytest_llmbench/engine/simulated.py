"""A conversation with a simulated user (a case's ``simulated_user:``) as one item with many calls.

:func:`simulate` alternates two models. The simulated user writes each user message from its
instructions and the conversation so far, seen with the roles swapped (its own lines as
``assistant``, the model's replies as ``user``: :func:`user_view`, the one place its prompt is
written); the model under test answers it from the whole history, as it answers a scripted turn.
It ends when the simulated user says its stop marker (``goal``), after ``max_turns`` replies
(``max_turns``), when an assertion marked ``stop_on_fail`` fails on a reply (``failed``), or
when a reply holds the model's own marker ``agent_stop`` (``agent_done``). An agent answers the
simulated user through the same user side (:func:`user_line`, :func:`user_view`) in its kind
(``engine/kinds/agent_conversation_kind``).
Both models' calls go through the ``complete`` functions the :class:`~.answer.Answerer` gives:
paced, rate-limited, budgeted, cached (the history is in the key) and counted. The simulated
user's errors are the item's, named as its (:func:`user_error`), never the model's failure; an
empty message is asked for once more, then such an error: it is never sent to the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..models import Completion, ItemError, UserSimError
from ..spec import Turn
from .conversation_calls import CompleteTurn, Progress, cut_short, reply_messages
from .grading import said_messages
from .pacing import BudgetExceeded
from .request import ConversationRun, Reply

if TYPE_CHECKING:
    from ..spec import SimulatedUser
    from .plan import CallPlan

#: One call of the simulated user: what it reads and the 0-based turn it writes.
AskUser = Callable[[list[dict[str, str]], int], Awaitable[Completion]]
#: Whether an assertion marked ``stop_on_fail`` fails on a reply: (user message, reply, what
#: the model said to the user up to it: :meth:`~.request.ConversationRun.said`).
StopCheck = Callable[[str, Completion, tuple[str, ...]], bool]

#: The simulated user's roles: the model's replies are what it answers.
_SWAPPED = {"user": "assistant", "assistant": "user"}
#: What the simulated user answers when it opens the conversation.
OPENING_CUE = "(The conversation starts: write your first message to the assistant.)"
#: What the simulated user reads for a message that said nothing at all.
EMPTY_MESSAGE = "(an empty message)"
#: Calls for one user message: the first, and one more after an empty message (as a judge is
#: asked once more after a malformed verdict).
LINE_ATTEMPTS = 2


def user_prompt(user: SimulatedUser) -> str:
    """The simulated user's system prompt: its part, its instructions and how it stops."""
    return (
        "You play the user in a conversation with an AI assistant, to test the assistant. "
        "Stay in character: write only your next message to the assistant, as this user "
        "would write it, and nothing else.\n\n"
        f"Who you are and what you want:\n{user.instructions}\n\n"
        f"When your goal is reached, or the conversation cannot go anywhere, write {user.stop} "
        "and nothing else."
    )


def user_view(user: SimulatedUser, history: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """What the simulated user reads: its prompt, then the conversation with roles swapped
    (the model's system prompt is not its own); it always answers a ``user`` message. The
    model's tool calls and their results are text in the model's message, as a judge sees
    them (:func:`.grading.said_messages`): a function-calling model's calls are all it said
    when it called, and nothing ran them; an agent's conversation gives ``history`` with the
    agent's answers alone (:mod:`.agent_talk`: its tools' results are not the user's to read).
    No message is empty (:data:`EMPTY_MESSAGE`), since some providers refuse one."""
    swapped = [
        {"role": _SWAPPED[message["role"]], "content": _not_blank(message["content"])}
        for message in said_messages(history)
        if message["role"] in _SWAPPED
    ]
    if not swapped or swapped[0]["role"] != "user":
        swapped.insert(0, {"role": "user", "content": OPENING_CUE})
    return [{"role": "system", "content": user_prompt(user)}, *swapped]


def _not_blank(text: str) -> str:
    # Anthropic's API refuses a message that is empty or only white space.
    return text if text.strip() else EMPTY_MESSAGE


async def simulate(
    complete: CompleteTurn,
    ask: AskUser,
    opening: Sequence[dict[str, Any]],
    user: SimulatedUser,
    name: str,
    failed: StopCheck | None = None,
    progress: Progress | None = None,
) -> ConversationRun:
    """Talk until the simulated user is done, ``max_turns`` replies, or a ``stop_on_fail``
    failure. ``opening`` is the model's first messages (its system prompt); ``name`` is the
    profile playing the user, which its errors name. An error or the budget ends the
    conversation as a scripted one's (:func:`.conversation_calls.cut_short`): what was said before
    is kept; the run's ``turns`` carry ``user.checks`` on every reply."""
    history = list(opening)
    progress = progress or Progress()
    stopped = "max_turns"
    try:
        for index in range(user.max_turns):
            try:
                text = await user_line(ask, user, history, index, progress)
            except ItemError as exc:
                raise user_error(exc, name) from None
            if text is None:
                stopped = "goal"
                break
            progress.turns.append(Turn("user", text, answered=True, checks=user.checks))
            progress.reached = index
            history.append({"role": "user", "content": text})
            sent = tuple(history)
            completion = await complete(sent, index)
            progress.replies.append(Reply(index, sent, completion))
            history.extend(reply_messages(completion, index))  # its tool calls, not run
            if failed is not None and failed(text, completion, progress.so_far().said(index)):
                stopped = "failed"
                break
            if said_agent_stop(user, completion.text):
                stopped = "agent_done"
                break
    except (ItemError, BudgetExceeded) as exc:
        raise cut_short(exc, progress) from None
    run = progress.so_far()
    return ConversationRun(run.replies, run.reached, run.turns, stopped, run.user_calls)


async def user_line(
    ask: AskUser,
    user: SimulatedUser,
    history: Sequence[dict[str, Any]],
    index: int,
    progress: Progress,
) -> str | None:
    """The user's message of turn ``index``, or None when it said its stop marker. The
    opening never ends the conversation: the model answers at least once. An empty message
    (an opening of the marker alone is one) is asked for once more with the problem named,
    then is a ``malformed`` error: some providers refuse an empty message, and it says
    nothing to the model under test."""
    if index == 0 and user.first_message is not None:
        return user.first_message
    view = user_view(user, history)
    for _ in range(LINE_ATTEMPTS):
        completion = await ask(view, index)
        progress.user_calls.append(completion)
        line = _read_line(user, completion.text, index)
        if line != "":
            return line
        view = [*view, *_empty_retry(user)]
    raise UserSimError(f"wrote an empty message (turn {index + 1})", "malformed")


def said_agent_stop(user: SimulatedUser, reply: str) -> bool:
    """Whether the model's ``reply`` holds the marker by which it ends the conversation."""
    return user.agent_stop is not None and user.agent_stop in reply


def _read_line(user: SimulatedUser, text: str, index: int) -> str | None:
    """The message in the simulated user's ``text`` ("" when it is empty), or None when it
    said its stop marker after the opening; in the opening the marker is dropped."""
    text = text.strip()
    if user.stop not in text:
        return text
    if index > 0:
        return None
    return text.replace(user.stop, "").strip()


def _empty_retry(user: SimulatedUser) -> list[dict[str, str]]:
    """The empty message, said as never empty, and the request to write it again."""
    again = (
        "(Your message was empty. Write your next message to the assistant, "
        f"or {user.stop} when your goal is reached.)"
    )
    return [{"role": "assistant", "content": EMPTY_MESSAGE}, {"role": "user", "content": again}]


def user_error(error: ItemError, name: str) -> ItemError:
    """A simulated user's error, said as one: the item's error, not the model's failure."""
    said = UserSimError(f"simulated user {name}: {error.message}", error.kind, error.retries)
    said.rate_limit_wait_s = error.rate_limit_wait_s
    return said


def stop_check(plan: CallPlan) -> StopCheck | None:
    """Whether a reply fails an assertion marked ``stop_on_fail`` (None: no such assertion, or
    ``--latency-only``). A check with nothing to measure does not stop the conversation."""
    user = plan.case.simulated_user
    if user is None or not user.stop_on_fail or plan.latency_only:
        return None
    from ..scoring import AssertionContext, CallMeasures, evaluate

    case = plan.case
    marked = [case.assertions[index] for index in user.stop_on_fail]
    schemas = plan.functions.schemas() if plan.functions is not None else None

    def failed(prompt: str, completion: Completion, said: tuple[str, ...]) -> bool:
        measures = CallMeasures.of(completion)
        context = AssertionContext(
            expected=case.expected,
            prompt=prompt,
            vars=case.vars,
            model=plan.model.name,
            case_id=case.id,
            base_dir=plan.base_dir,
            measures=measures,
            # as the item scores the turn: a tool-call check reads the reply's calls
            tool_calls=completion.tool_calls,
            tool_schemas=schemas,
            said=said,  # `communicated` reads every reply so far, as the item scores it
        )
        verdicts = [evaluate(assertion, completion.text, context) for assertion in marked]
        return any(not verdict.passed and not verdict.unchecked for verdict in verdicts)

    return failed
