"""How a plan is answered: the one call path of every model call this process makes.

:meth:`Answerer.answer` turns a :class:`~pytest_llmbench.engine.plan.CallPlan` into the
coroutine of its :class:`~pytest_llmbench.engine.request.Answer`: the optimizer's rewrite of an
optimized variant's prompt, then the plain call, the agent loop, the file's solver or a scripted
conversation's calls (:mod:`.conversation`), then the judges of its model-graded assertions
(:mod:`.grading`). :meth:`Answerer.complete` is a plain
test's call (the ``llm`` fixture). Every call goes through the
:class:`~pytest_llmbench.engine.pacing.CallPacer`: paced, cached, budgeted, rate-limited.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models.providers.completion import Completion, ProviderError
from .conversation import (
    CompleteTurn,
    Progress,
    converse,
    grade_turns,
    reply_messages,
    shim_reply_messages,
)
from .grading import HelperCalls, HelperTargets, grade
from .request import (
    Answer,
    ConversationRun,
    Request,
    agent_completion,
    estimate_tokens,
    optimized_messages,
    with_images,
)

if TYPE_CHECKING:
    from ..agent.loop import AgentRun, AsyncToolboxLike, ToolboxLike
    from ..agent.mcp_pool import McpPool
    from ..agent.tools import Toolbox
    from ..models.profiles import ModelProfile
    from ..models.providers.completion import CallTarget
    from .contests import Contests
    from .loglikelihood import OptionScores
    from .optimizer import PromptOptimizer, Rewrite
    from .pacing import CallPacer
    from .plan import CallPlan

#: Put first on an agent command's PATH: this Python (with pytest) as ``python``/``python3``.
_PYTHON_BIN = (Path(sys.executable).parent,)


class Answerer:
    """Answers the plans (and plain tests' calls) of this process through one pacer."""

    def __init__(
        self,
        pacer: CallPacer,
        resolve: Callable[..., CallTarget],
        n_workers: int,
        *,
        judge_metrics: Sequence[str] = (),
        optimizer_store: Path | None = None,
        claim_timeout_s: float = 360.0,
        mcp_scratch: Callable[[str], Path] | None = None,
        baseline: Path | None = None,
        contests: Contests | None = None,
    ) -> None:
        self._pacer = pacer
        self._resolve = resolve
        self._helpers = HelperCalls(pacer, n_workers, baseline, contests)
        self._judge_metrics = tuple(judge_metrics)
        self._store = optimizer_store
        self._claim_timeout_s = claim_timeout_s
        self._optimizer: PromptOptimizer | None = None
        #: models found unable to score log-likelihoods: their next items fail without a call
        self._cannot_score: dict[str, ProviderError] = {}
        self._probes: dict[str, asyncio.Event] = {}  #: set once a model's first item is done
        #: the conversations running now, by node id (read when pytest-timeout ends one)
        self._talks: dict[str, Progress] = {}
        #: where a shared MCP stdio server runs (a folder made per server); the pool, once used
        self._mcp_scratch = mcp_scratch
        self._mcp_pool: McpPool | None = None

    # -- main thread --------------------------------------------------------------------------
    def answer(
        self, plan: CallPlan, workdir: Path | None, *, stream: bool
    ) -> Answer | Coroutine[Any, Any, Answer]:
        """``plan``'s answer when the response cache has it (one plain call, no judge), else
        the coroutine answering it (run it on the engine loop).

        Targets are resolved here, on the calling (main) thread: an embedded server starts
        (seconds) without blocking the engine loop, and a missing key is the item's setup error.
        Images come first: a model known not to take them fails before any server starts.
        A cached answer is read here too: a fully cached run never wakes the engine's thread.
        """
        request = self._request(plan, stream)
        if _one_plain_call(plan):
            found = self._pacer.cached(request)
            if isinstance(found, Completion):
                return _answered(plan, request, found)
            request = found
        targets = {judge.name: self._helper_target(judge) for judge in plan.judge_profiles}
        toolbox = self._toolbox(plan, workdir) if plan.agent is not None else None
        if self._helpers.contests.members(plan.nodeid):
            return self._contesting(plan, lambda: self._answer(plan, request, targets, toolbox))
        return self._answer(plan, request, targets, toolbox)

    def claim(self, plan: CallPlan, answer: Answer) -> Answer:
        """``answer`` as ``plan``'s item reports it: a select-best contest's judge calls on one
        contestant's record only (:meth:`.contests.Contests.claim`)."""
        graded = self._helpers.contests.claim(plan, answer.graded)
        return answer if graded is answer.graded else dataclasses.replace(answer, graded=graded)

    def contestants(self, nodeid: str) -> tuple[str, ...]:
        """The contestants of item ``nodeid``'s select-best contest (itself included), or ()."""
        return self._helpers.contests.members(nodeid)

    async def withdraw(self, nodeid: str, why: str) -> None:
        """Item ``nodeid`` has no answer for its contest (its setup failed)."""
        await self._helpers.contests.withdraw(nodeid, why)

    async def _contesting(
        self, plan: CallPlan, answering: Callable[[], Coroutine[Any, Any, Answer]]
    ) -> Answer:
        """A contestant's answer: when it fails (or is cancelled) before its contest is judged,
        the contest goes on without it instead of waiting for it. (``answering`` makes the
        coroutine here, so that none is left unawaited when this one is cancelled unstarted.)"""
        try:
            return await answering()
        except BaseException as exc:
            why = exc.message if isinstance(exc, ProviderError) else type(exc).__name__
            await self._helpers.contests.withdraw(plan.nodeid, why)
            raise

    def _request(self, plan: CallPlan, stream: bool) -> Request:
        """The request of ``plan``'s own call."""
        messages = with_images(plan, plan.case.messages)
        tools = plan.tool_params
        if shimmed(plan):
            messages, tools = _shim_request(plan, messages)
        scoring = plan.case.loglikelihood is not None
        return Request(
            target=self._resolve(plan.model, scoring=scoring),
            messages=messages,
            params={**plan.call_params, **tools},
            key_params={**plan.params, **tools},
            repeat=plan.repeat,
            stream=stream,
            lane=self._pacer.lane(plan.model, plan.parallel_safe),
            slots=tuple(self._helpers.slots(plan)),
            estimate=estimate_tokens(plan.case.messages, plan.answer_token_budget),
            model_name=plan.model.name,
            nodeid=plan.nodeid,
        )

    def complete(
        self,
        model: ModelProfile,
        messages: Sequence[dict[str, Any]],
        params: dict[str, Any],
        *,
        repeat: int,
        call: int,
        nodeid: str,
    ) -> Coroutine[Any, Any, Completion]:
        """The coroutine of a plain test's ``call``-th call of ``model`` (the ``llm`` fixture):
        streamed, on the model's lane, its cache entry its own."""
        request = Request(
            target=self._resolve(model),
            messages=tuple(messages),
            params=params,
            key_params={**model.params, **params, "llmbench_call": call},
            repeat=repeat,
            stream=True,
            lane=self._pacer.lane(model, file_parallel_safe=True),
            slots=tuple(self._helpers.model_slots(model)),
            estimate=estimate_tokens(messages),
            model_name=model.name,
            nodeid=nodeid,
        )
        return self._pacer.paced(request)

    def _toolbox(self, plan: CallPlan, workdir: Path | None) -> Toolbox:
        """The agent's tools on its workdir (made in setup). A sandbox that is required but
        unavailable, or one that would refuse the item's commands, fails here as the item's
        ``sandbox`` error (a set-up problem of this machine, not the model's nor the file's)."""
        from ..agent.sandbox import Sandbox, SandboxLimits, SandboxUnavailable
        from ..agent.tools import Toolbox

        agent = plan.agent
        assert agent is not None and workdir is not None
        try:
            sandbox = Sandbox(workdir, SandboxLimits(), mode=agent.sandbox, path_prefix=_PYTHON_BIN)
            toolbox = Toolbox(workdir, agent.local_tools, sandbox, base_dir=plan.base_dir)
        except SandboxUnavailable as exc:  # sandbox: required
            raise ProviderError(str(exc), "sandbox") from None
        except ValueError as exc:  # a bad custom tool
            raise ProviderError(f"{plan.model.name}: {exc}", "config") from None
        if sandbox.refusal is not None and _runs_commands(plan):
            # Before any model call: an agent that cannot run its commands is not measured.
            raise ProviderError(sandbox.refusal, "sandbox")
        return toolbox

    def _helper_target(self, judge: ModelProfile) -> CallTarget | ProviderError:
        """A judge's target, or why it cannot be called: that judge alone is then excluded."""
        try:
            return self._resolve(judge)
        except ProviderError as exc:
            return exc
        except Exception as exc:  # an embedded server that will not start, say
            return ProviderError(f"{judge.name}: {type(exc).__name__}: {exc}", "provider")

    # -- engine loop --------------------------------------------------------------------------
    async def _answer(
        self, plan: CallPlan, request: Request, targets: HelperTargets, toolbox: Toolbox | None
    ) -> Answer:
        """The plan's answer (an agent's whole loop), then its model-graded verdicts."""
        run: AgentRun | None = None
        conversation: ConversationRun | None = None
        verdict: bool | None = None
        options: OptionScores | None = None
        optimization: dict[str, Any] | None = None
        retrieved: tuple[str, ...] | None = None  # a solver's context
        if plan.variant.optimized:
            rewrite = await self._rewrite(plan, targets)
            optimization = rewrite.to_record()
            request = dataclasses.replace(request, messages=optimized_messages(plan, rewrite))
        if toolbox is not None:
            run = await self._agent(plan, request, toolbox, targets)
            completion = agent_completion(run, request.target.model_id)
        elif plan.solver is not None:
            completion, verdict, retrieved = await self._solve(plan, request)
        elif plan.case.loglikelihood is not None:
            completion, options = await self._score_options(plan, request)
        elif plan.case.simulated_user is not None:
            conversation = await self._simulate(plan, request, targets)
            completion = _whole(conversation, request)
        elif plan.case.turns:
            conversation = await self._converse(plan, request)
            completion = _whole(conversation, request)
        else:
            completion = _read_shim(plan, await self._pacer.paced(request))
        if conversation is not None:
            graded = await grade_turns(
                self._helpers, plan, conversation, targets, self._judge_metrics
            )
            request = dataclasses.replace(request, messages=conversation.replies[-1].sent)
        else:
            graded = await grade(
                self._helpers, plan, completion, targets, self._judge_metrics, retrieved, run
            )
        sandbox = toolbox.sandbox if toolbox is not None else None
        scores = options.to_record() if options is not None else None
        sent = _sent(plan, request)
        return Answer(
            completion,
            graded,
            run,
            sandbox,
            optimization,
            sent,
            verdict,
            scores,
            conversation,
            retrieved_context=retrieved,
        )

    def _turn_call(self, plan: CallPlan, request: Request) -> CompleteTurn:
        """The call of one turn of ``plan``'s conversation: ``request`` sent with the history it
        answers, paced, cached, budgeted; its cache entry keyed by the turn and that history."""

        async def complete(messages: tuple[dict[str, Any], ...], turn: int) -> Completion:
            call = dataclasses.replace(
                request,
                messages=messages,
                key_params={**request.key_params, "llmbench_turn": turn},
                estimate=estimate_tokens(messages, plan.answer_token_budget),
                missed_key=None,
            )
            return _read_shim(plan, await self._pacer.paced(call))

        return complete

    async def _converse(self, plan: CallPlan, request: Request) -> ConversationRun:
        """A scripted conversation: each answered turn is a paced, cached, budgeted call of the
        plan's model, its cache entry keyed by the turn and the whole history it answers."""
        complete = self._turn_call(plan, request)
        progress = self._talks[plan.nodeid] = Progress()
        try:
            said = shim_reply_messages if shimmed(plan) else reply_messages
            return await converse(complete, request.messages, plan.case.turns, progress, said)
        finally:
            if self._talks.get(plan.nodeid) is progress:
                del self._talks[plan.nodeid]

    async def _simulate(
        self, plan: CallPlan, request: Request, targets: HelperTargets
    ) -> ConversationRun:
        """A conversation with a simulated user: the model's turns are called as a scripted
        conversation's; the simulated user's are a helper model's calls (its own lane), each
        keyed by the history it reads. Its errors are the item's, never the model's failure."""
        from ..spec.turns import with_case_checks
        from .simulated import simulate, stop_check

        user = plan.case.simulated_user
        assert user is not None and plan.user_sim is not None
        profile = plan.user_sim
        complete = self._turn_call(plan, request)

        async def ask(messages: list[dict[str, str]], turn: int) -> Completion:
            asked = self._helpers.request(plan, profile, targets, messages, {})
            if isinstance(asked, ProviderError):
                raise asked
            nodeid = f"{plan.nodeid} (simulated user {profile.name})"
            return await self._pacer.paced(dataclasses.replace(asked, nodeid=nodeid))

        progress = self._talks[plan.nodeid] = Progress()
        failed = stop_check(plan)
        try:
            run = await simulate(
                complete, ask, request.messages, user, profile.name, failed, progress
            )
        finally:
            if self._talks.get(plan.nodeid) is progress:
                del self._talks[plan.nodeid]
        turns = with_case_checks(run.turns, len(user.checks), len(plan.case.assertions))
        return dataclasses.replace(run, turns=turns)

    def said_so_far(self, nodeid: str) -> ConversationRun | None:
        """What the conversation of item ``nodeid`` said so far, while it runs (else None)."""
        progress = self._talks.get(nodeid)
        return progress.so_far() if progress is not None else None

    async def _score_options(
        self, plan: CallPlan, request: Request
    ) -> tuple[Completion, OptionScores]:
        """Each option's log-probability (:mod:`.loglikelihood`). A model's first item asks
        alone: when the model cannot score, its other items fail without a call."""
        from .loglikelihood import score_options

        assert plan.case.loglikelihood is not None and plan.case.answer_index is not None
        name = plan.model.name
        probe = self._probes.get(name)
        if probe is not None:
            await probe.wait()
        else:
            probe = self._probes[name] = asyncio.Event()
        known = self._cannot_score.get(name)
        if known is not None:
            raise ProviderError(known.message, known.kind)
        try:
            return await score_options(
                self._pacer.paced, request, plan.case.loglikelihood, plan.case.answer_index
            )
        except ProviderError as error:
            if error.kind == "unsupported":
                self._cannot_score[name] = error
            raise
        finally:
            probe.set()

    async def _rewrite(self, plan: CallPlan, targets: HelperTargets) -> Rewrite:
        """The plan's prompt rewritten for its model by the optimizer (once per run)."""
        optimizer = plan.optimizer
        assert optimizer is not None

        async def complete(messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
            request = self._helpers.request(plan, optimizer, targets, messages, params)
            if not isinstance(request, ProviderError):
                # One rewrite per prompt and model, whichever repeat asks first.
                nodeid = f"{plan.nodeid} (optimizer {optimizer.name})"
                request = dataclasses.replace(request, repeat=0, nodeid=nodeid)
            return await self._helpers.call(request)

        rewriter = self._prompt_optimizer(optimizer)
        return await rewriter.rewrite(plan.case.template, plan.model, complete)

    def _prompt_optimizer(self, profile: ModelProfile) -> PromptOptimizer:
        if self._optimizer is None:
            from .optimizer import PromptOptimizer

            assert self._store is not None
            self._store.parent.mkdir(parents=True, exist_ok=True)
            self._optimizer = PromptOptimizer(
                self._store, profile, claim_timeout_s=self._claim_timeout_s
            )
        return self._optimizer

    async def _solve(
        self, plan: CallPlan, request: Request
    ) -> tuple[Completion, bool | None, tuple[str, ...] | None]:
        """The file's ``solver`` answers the case, its model calls paced like the item's; its
        own verdict, when it judged itself, and the context it retrieved."""
        from ..spec.templating import last_user_text
        from .solver import SolverCase, run_solver, solver_completion

        calls = 0

        async def complete(messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
            nonlocal calls
            calls += 1
            # Each call of the solver is its own answer: the n-th call has its own cache entry.
            key_params = {**request.key_params, **params, "llmbench_solver_call": calls}
            call = dataclasses.replace(
                request,
                messages=tuple(messages),
                params={**request.params, **params},
                key_params=key_params,
                stream=request.stream and calls == 1,
            )
            return await self._pacer.paced(call)

        assert plan.solver is not None
        case = SolverCase(
            id=plan.case.id,
            prompt=last_user_text(request.messages),
            messages=tuple(request.messages),
            vars=dict(plan.case.vars),
            expected=plan.case.expected,
            choices=plan.case.choices,
            model=plan.model.name,
            context=plan.case.context,
        )
        run = await run_solver(plan.solver, plan.base_dir, case, complete)
        _check_context(plan, run.context)
        return solver_completion(run, request.target.model_id), run.verdict, run.context

    async def _agent(
        self, plan: CallPlan, request: Request, toolbox: Toolbox, targets: HelperTargets
    ) -> AgentRun:
        """The agent loop: every turn is a paced, cached, budgeted call of the plan's model."""
        from ..agent.loop import run_agent
        from ..spec.functions import shim_applies

        agent = plan.agent
        assert agent is not None

        async def complete(messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
            turn = dataclasses.replace(
                request,
                messages=tuple(messages),
                params={**request.params, **params},
                key_params={**request.key_params, **params},
                stream=False,  # an agent run records no TTFT: its turns are read whole
            )
            return await self._pacer.paced(turn)

        interpret = None
        interpreter = plan.shim_interpreter
        if interpreter is not None:

            async def interpret(
                messages: list[dict[str, Any]], params: dict[str, Any]
            ) -> Completion:
                asked = self._helpers.request(plan, interpreter, targets, messages, params)
                return await self._helpers.call(asked)

        shim = shim_applies(agent.tool_shim, plan.model.embedded)
        tools: ToolboxLike | AsyncToolboxLike = toolbox
        names: Sequence[str] = agent.tools
        async with contextlib.AsyncExitStack() as sessions:
            if agent.mcp_selections:
                from ..agent.mcp import open_mcp_tools

                # One session per server for this item, closed when the loop ends (or fails);
                # a shared server's is the process's (the pool's).
                servers, selections = agent.mcp_servers, agent.mcp_selections
                mcp = open_mcp_tools(servers, selections, toolbox, self._mcp())
                tools = await sessions.enter_async_context(mcp)
                names = tools.names
            return await run_agent(
                complete,
                tools,
                request.messages,
                max_turns=agent.max_turns,
                limit_seconds=agent.limit_seconds,
                limit_tokens=agent.limit_tokens,
                shim=shim,
                tool_names=names,
                interpret=interpret,
            )

    def _mcp(self) -> McpPool:
        """This process's MCP pool (shared servers, the bound on running ones), made once."""
        if self._mcp_pool is None:
            import tempfile

            from ..agent.mcp_pool import McpPool

            def mkdtemp(name: str) -> Path:
                return Path(tempfile.mkdtemp(prefix=f"llmbench-{name}-"))

            self._mcp_pool = McpPool(self._mcp_scratch or mkdtemp)
        return self._mcp_pool

    def activity(self) -> tuple[int, int]:
        """This process's calls in flight, and those waiting on a rate limit."""
        return self._pacer.activity()

    def close(self) -> None:
        """Close the optimizer's store and the response cache, and stop the shared MCP
        servers."""
        if self._optimizer is not None:
            self._optimizer.close()
        self._pacer.close()
        if self._mcp_pool is not None:
            self._mcp_pool.close()


def _one_plain_call(plan: CallPlan) -> bool:
    """Whether ``plan``'s answer is its model's one completion and nothing more: no rewrite,
    agent loop, solver, option scoring, conversation or judge."""
    return not (
        plan.variant.optimized
        or plan.agent is not None
        or plan.solver is not None
        or plan.case.loglikelihood is not None
        or plan.case.conversational
        or plan.graded
    )


def _whole(conversation: ConversationRun, request: Request) -> Completion:
    """A finished conversation as one completion (it has a reply: its last turn is answered)."""
    completion = conversation.completion(request.target.model_id)
    assert completion is not None
    return completion


def _answered(plan: CallPlan, request: Request, completion: Completion) -> Answer:
    """The answer of a plan that :func:`_one_plain_call` answers with ``completion``."""
    return Answer(_read_shim(plan, completion), messages=_sent(plan, request))


def shimmed(plan: CallPlan) -> bool:
    """Whether ``plan`` offers its function definitions through the tool shim: a plain
    (one-reply) call, or every turn of a scripted conversation, whose file says so for its
    model; a simulated user's conversation offers them natively."""
    functions = plan.functions
    return (
        functions is not None
        and plan.case.simulated_user is None
        and functions.shimmed(plan.model.embedded)
    )


def _shim_request(
    plan: CallPlan, messages: Sequence[dict[str, Any]]
) -> tuple[tuple[dict[str, Any], ...], dict[str, Any]]:
    """The messages and parameters of a shimmed function-calling call: the tools and the
    protocol in the system message, its JSON shapes as the response format (no ``tools``)."""
    from ..agent.shim import calls_response_format, with_shim_prompt

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


def _read_shim(plan: CallPlan, completion: Completion) -> Completion:
    """A shimmed reply read as a native one: its protocol calls as ``tool_calls``, the text
    its answer ("" when it called)."""
    if not shimmed(plan):
        return completion
    from ..agent.shim import parse_calls_reply

    calls, answer = parse_calls_reply(completion.text)
    return dataclasses.replace(completion, text=answer, tool_calls=calls)


def _check_context(plan: CallPlan, retrieved: tuple[str, ...] | None) -> None:
    """A solver that returned no ``context`` for a case without one, where a RAG metric or a
    grader's ``{{context}}`` reads it: an error of the item naming the field, never a judge's
    guess nor an unchecked verdict."""
    from ..scoring.judged import EmbeddingSpec
    from ..spec.graders import needs_context

    if retrieved is not None or plan.case.context is not None:
        return
    needs = sorted(
        {
            entry.assertion.type
            for entry in plan.graded
            if not isinstance(entry.spec, EmbeddingSpec) and needs_context(entry.spec)
        }
    )
    if needs:
        raise ProviderError(
            f"solver {plan.solver}: returned no `context` (a dict with 'answer' and 'context') "
            f"and the case has none; {', '.join(needs)} need one",
            "solver",
        )


def _sent(plan: CallPlan, request: Request) -> tuple[dict[str, Any], ...] | None:
    """The messages sent, when they are not the case's own (a rewritten prompt, images)."""
    return None if request.messages is plan.case.messages else tuple(request.messages)


def _runs_commands(plan: CallPlan) -> bool:
    """Whether the item runs shell commands: the ``run_command`` tool, a ``command`` check,
    the file's ``post_process``, or a stdio MCP server its tools come from."""
    agent = plan.agent
    assert agent is not None
    checks = (assertion.agent_check for assertion in plan.case.assertions)
    commands = any(check is not None and check.base_type == "command" for check in checks)
    used = {server for server, _ in agent.mcp_selections}
    stdio = any(s.command is not None and s.name in used for s in agent.mcp_servers)
    return "run_command" in agent.tools or commands or agent.post_process is not None or stdio
