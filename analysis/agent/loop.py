"""The LLM agent: a bounded tool loop over the deployed code, ending in a validated JSON answer.

One `analyze` call is one conversation with Ollama (langchain-ollama `ChatOllama`, tools bound). Bounds:
`max_steps` model requests in all (the last one offers no tools and asks for the answer under Ollama's
`format` JSON schema), a wall-clock timeout, a per-tool output cap and a total context budget. Identical
repeated tool calls are answered from a cache. An answer that fails the schema is retried once with the
validation error; after that the heuristic report is returned with status `failed`.

Ollama being unreachable, answering HTTP errors, timing out or breaking its stream raises the retriable
`LlmUnavailable`, so the pipeline can publish the heuristic report and open its circuit breaker.
"""

from __future__ import annotations

import json
import math
import posixpath
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import ollama
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_ollama import ChatOllama

from analysis.agent.answer import past_case_refs, validated_analysis
from analysis.agent.config import MIN_TOOL_OUTPUT, AgentConfig
from analysis.agent.prompt import (
    FINAL_INSTRUCTION,
    MAX_ANSWER_CHARS,
    SYSTEM_PROMPT,
    AnswerError,
    PromptInputs,
    TextRedactor,
    build_user_message,
    new_nonce,
    parse_answer,
    quote_data,
    retry_instruction,
)
from analysis.code.repo import Checkout
from analysis.code.tools import FileTools, ToolResult, tool_specs
from analysis.code.validate import normalise_path
from analysis.errors import LogAgentError
from analysis.event import Cluster
from analysis.report import AgentAnswer, Analysis

_ANSWER_SCHEMA = AgentAnswer.model_json_schema()
_EXCERPT_RADIUS = 12


class LlmUnavailable(LogAgentError):
    """Ollama could not answer (unreachable, HTTP error, timeout, broken stream); retrying later may work."""

    retriable = True


@dataclass
class AgentStats:
    """What one analysis cost and did; the pipeline turns it into metrics.

    `tool_calls` counts by (tool, outcome): tool is a known tool name or "unknown", outcome one of
    ok, no_data, error, cached. `stop_reason`: answered, step_cap, timeout or context_budget.
    """

    steps: int = 0
    tool_calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    cached_calls: int = 0
    llm_seconds: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    dropped_citations: int = 0
    dropped_reasons: list[str] = field(default_factory=list)
    answer_retried: bool = False
    stop_reason: str = ""


@dataclass(frozen=True)
class AgentOutcome:
    """The finished analysis (status analyzed or failed) and the stats of the run that made it."""

    analysis: Analysis
    stats: AgentStats


@dataclass
class _Run:
    """The state of one conversation."""

    tools: FileTools
    deadline: float
    messages: list[BaseMessage]
    stats: AgentStats = field(default_factory=AgentStats)
    cache: dict[tuple[str, str], str] = field(default_factory=dict)
    reads: set[str] = field(default_factory=set)

    def size(self) -> int:
        """Characters of the conversation so far (content plus tool-call arguments)."""
        total = 0
        for message in self.messages:
            total += len(message.content) if isinstance(message.content, str) else len(str(message.content))
            if isinstance(message, AIMessage) and message.tool_calls:
                total += len(json.dumps([c["args"] for c in message.tool_calls], default=str))
        return total


class Agent:
    """Runs the bounded tool loop for one burst at a time (thread-safe; one ChatOllama shared)."""

    def __init__(self, config: AgentConfig, redactor: TextRedactor, base_url: str) -> None:
        self._config = config
        self._redactor = redactor
        self._specs = {spec["name"]: spec for spec in tool_specs()}
        self._llm = ChatOllama(
            model=config.model,
            base_url=base_url,
            temperature=config.temperature,
            num_ctx=config.num_ctx,
            client_kwargs={"timeout": config.request_timeout_s},
        )
        self._llm_with_tools = self._llm.bind_tools(
            [{"type": "function", "function": spec} for spec in self._specs.values()]
        )
        self._base_url = base_url.rstrip("/")

    def answers(self, timeout_s: float = 3.0) -> bool:
        """Whether Ollama answers at all (`GET /api/version`), the model asked nothing."""
        try:
            return httpx.get(f"{self._base_url}/api/version", timeout=timeout_s).is_success
        except (httpx.HTTPError, ValueError):  # refused, timed out, a URL it cannot open
            return False

    def analyze(
        self,
        cluster: Cluster,
        checkout: Checkout,
        tools: FileTools,
        heuristic: Analysis,
        past_cases: Sequence[Mapping[str, Any]] = (),
    ) -> AgentOutcome:
        """Investigate the burst and return a validated analysis.

        Raises LlmUnavailable when Ollama cannot be used; an unusable answer gives status `failed`.
        """
        started = time.monotonic()
        run = _Run(tools=tools, deadline=started + self._config.timeout_s, messages=[])
        excerpt, label = self._excerpt(run, heuristic)
        user = build_user_message(
            PromptInputs(
                cluster=cluster,
                heuristic=heuristic,
                excerpt=excerpt,
                excerpt_label=label,
                past_cases=past_cases,
            ),
            self._redactor,
            budget_chars=self._config.prompt_budget_chars,
        )
        run.messages = [SystemMessage(SYSTEM_PROMPT), HumanMessage(user)]
        answer = self._investigate(run)
        failure = None
        if answer is None:
            answer, failure = self._final_answer(run)
        base = heuristic.model_copy(
            update={
                "model": self._config.model,
                "past_cases": heuristic.past_cases or past_case_refs(past_cases),
                "tokens": {"prompt": run.stats.prompt_tokens, "completion": run.stats.completion_tokens},
                "timings": {
                    **heuristic.timings,
                    "llm_s": round(sum(run.stats.llm_seconds), 6),
                    "total_s": round(time.monotonic() - started, 6),
                },
            }
        )
        if answer is None:
            analysis = base.model_copy(
                update={
                    "status": "failed",
                    "analyzer": "llm",
                    "failure_reason": failure,
                    "notes": [*heuristic.notes, "the model gave no valid answer; heuristic findings kept"],
                }
            )
        else:
            analysis, dropped = validated_analysis(answer, base, checkout, run.reads, _stop_notes(run.stats))
            run.stats.dropped_citations = len(dropped)
            run.stats.dropped_reasons = dropped
        return AgentOutcome(Analysis.model_validate(analysis.model_dump()), run.stats)

    # -- the loop -----------------------------------------------------------------------------------

    def _investigate(self, run: _Run) -> AgentAnswer | None:
        """Tool steps until the model answers or a bound is hit; the last step is left for the answer."""
        for _ in range(self._config.max_steps - 1):
            if time.monotonic() >= run.deadline:
                run.stats.stop_reason = "timeout"
                return None
            if run.size() >= self._config.context_budget_chars:
                run.stats.stop_reason = "context_budget"
                return None
            reply = self._invoke(run, with_tools=True)
            if reply is None:
                continue
            left_out = self._cap_calls(run, reply)
            run.messages.append(reply)
            if not reply.tool_calls:
                try:
                    answer = parse_answer(_text(reply))
                except AnswerError:
                    return None  # prose instead of JSON: the final step asks for it under the schema
                run.stats.stop_reason = "answered"
                return answer
            for call in reply.tool_calls:
                run.messages.append(self._run_tool(run, call["name"], call["args"], call.get("id") or ""))
            if left_out:
                run.messages.append(HumanMessage(f"[error] {left_out} more tool calls of your last reply were not "
                                                 f"run: one reply runs {self._config.max_tool_calls_per_step} at most"))
        run.stats.stop_reason = "step_cap"
        return None

    def _final_answer(self, run: _Run) -> tuple[AgentAnswer | None, str | None]:
        """The tool-less step under the answer schema, and one retry with the validation error."""
        run.stats.stop_reason = run.stats.stop_reason or "answered"
        run.messages.append(HumanMessage(FINAL_INSTRUCTION))
        reply = self._invoke(run, with_tools=False)
        try:
            return parse_answer(_text(reply)), None
        except AnswerError as first:
            error = first
        if reply is not None:
            run.messages.append(reply)
        run.messages.append(HumanMessage(retry_instruction(str(error))))
        run.stats.answer_retried = True
        retry = self._invoke(run, with_tools=False)
        try:
            return parse_answer(_text(retry)), None
        except AnswerError as second:
            return None, f"invalid answer after one retry: {second}"[:500]

    def _invoke(self, run: _Run, *, with_tools: bool) -> AIMessage | None:
        """One model request; None when the model's tool-call arguments could not even be parsed."""
        started = time.monotonic()
        try:
            # A step ends with the investigation (and a request timeout); the answer, asked after it, may take
            # as long again (a slow model writes it at a few tokens a second).
            if with_tools:
                result = _joined(self._llm_with_tools.stream(run.messages),
                                 run.deadline + self._config.request_timeout_s)
            else:
                result = _joined(self._llm.stream(run.messages, format=_ANSWER_SCHEMA),
                                 started + self._config.timeout_s)
        except OutputParserException:
            # The model wrote tool arguments that are not JSON; tell it and let the next step fix it.
            run.messages.append(
                HumanMessage(
                    "Your last tool call had arguments that are not a JSON object. "
                    "Call the tool again with valid JSON arguments."
                )
            )
            return None
        except ollama.ResponseError as exc:
            raise LlmUnavailable(f"Ollama answered HTTP {exc.status_code}: {exc.error[:200]}") from None
        except (ConnectionError, httpx.ConnectError, httpx.TimeoutException) as exc:
            raise LlmUnavailable(f"Ollama unreachable or too slow: {type(exc).__name__}") from None
        except (httpx.HTTPError, ValueError, TypeError, RecursionError) as exc:  # pydantic's ValidationError among them
            # A cut or garbled NDJSON stream is the server's (or a proxy's) fault, not the model's answer; so
            # is JSON Python refuses (a number of over 4,300 digits), nests past the stack, or arguments that
            # langchain-ollama reads as Python literals no JSON holds (a set, bytes: a TypeError).
            raise LlmUnavailable(f"Ollama stream broken: {type(exc).__name__}") from None
        finally:
            run.stats.steps += 1
            run.stats.llm_seconds.append(time.monotonic() - started)
        usage = result.usage_metadata
        if usage is not None:
            run.stats.prompt_tokens += usage["input_tokens"]
            run.stats.completion_tokens += usage["output_tokens"]
        return result

    def _cap_calls(self, run: _Run, reply: AIMessage) -> int:
        """Keep the reply's first tool calls that may run (counting the others as not run) and make their
        arguments JSON again; how many were left out. A review's reply of 60,000 calls took 49 s: each was
        answered in the conversation, whose size was summed again for each."""
        cap = self._config.max_tool_calls_per_step
        for call in reply.tool_calls[cap:]:
            run.stats.tool_calls[(call["name"] if call["name"] in self._specs else "unknown", "not_run")] += 1
        left_out = max(0, len(reply.tool_calls) - cap)
        try:
            reply.tool_calls = [{**call, "args": _finite(call["args"])} for call in reply.tool_calls[:cap]]
        except RecursionError:  # arguments nested past the stack could not be sent back either
            raise LlmUnavailable("Ollama stream broken: tool arguments nested too deeply") from None
        return left_out

    # -- tools --------------------------------------------------------------------------------------

    def _run_tool(self, run: _Run, name: str, args: Mapping[str, Any], call_id: str) -> ToolMessage:
        """Execute one model tool call (never raises) and return its capped, redacted result message. Past
        the timeout or the context budget the call is answered as not run: each may take up to a tool's
        timeout (a reply's calls past its share are left out before: `_cap_calls`)."""
        spec = self._specs.get(name)
        label = name if spec is not None else "unknown"
        why = ("the investigation's time is up" if time.monotonic() >= run.deadline
               else "the conversation is full" if run.size() >= self._config.context_budget_chars else None)
        if why is not None:
            run.stats.tool_calls[(label, "not_run")] += 1
            return ToolMessage(content=f"[error] not run: {why}", tool_call_id=call_id, name=label)
        checked, problem = _check_arguments(spec, name, args, sorted(self._specs))
        if checked is None:
            run.stats.tool_calls[(label, "error")] += 1
            return ToolMessage(content=f"[error] {problem}", tool_call_id=call_id, name=label)
        key = (name, json.dumps(checked, sort_keys=True))
        if key in run.cache:
            run.stats.cached_calls += 1
            run.stats.tool_calls[(label, "cached")] += 1
            text = (
                "[repeated call: you already made this exact call; same result as before, do not "
                "repeat it]\n" + run.cache[key]
            )
            return ToolMessage(content=text, tool_call_id=call_id, name=name)
        result = _call_tool(run.tools, name, checked)
        run.stats.tool_calls[(label, result.status)] += 1
        if name == "read_file" and result.status == "ok":
            _record_read(run, str(checked["path"]), result)
        room = self._config.context_budget_chars - run.size()
        limit = max(MIN_TOOL_OUTPUT, min(self._config.tool_output_chars, room))
        # The repository's text is untrusted like the log's: quoted as data, so a file cannot close the
        # block, hide characters or pass for an instruction; the status stays outside, ours.
        nonce = new_nonce()
        room_inside = limit - len(quote_data(name, "", nonce)) - len(result.status) - 3
        text = f"[{result.status}] " + quote_data(name, _cap(self._redactor.redact(result.output), room_inside), nonce)
        run.cache[key] = text
        return ToolMessage(content=text, tool_call_id=call_id, name=name)

    def _excerpt(self, run: _Run, heuristic: Analysis) -> tuple[str, str]:
        """The code around the heuristic culprit, read through the tools so it counts as read."""
        culprit = heuristic.culprit
        if culprit is None or culprit.line is None:
            return "", ""
        first = max(1, culprit.line - _EXCERPT_RADIUS)
        result = run.tools.read_file(culprit.path, first, culprit.line + _EXCERPT_RADIUS)
        if result.status != "ok":
            return "", ""
        _record_read(run, culprit.path, result)
        return _cap(result.output, self._config.tool_output_chars), culprit.path


# -- pure helpers -------------------------------------------------------------------------------------


def _joined(stream: Iterator[BaseMessage], deadline: float) -> AIMessage:
    """The streamed reply as one message; LlmUnavailable when it is still streaming past `deadline` (each read
    within the request timeout: a review's drip ran a 2 s investigation to 60 s) or past `MAX_ANSWER_CHARS`
    (160 MB joined held 2.7 GB). Stopping the iteration closes the connection."""
    joined: AIMessageChunk | None = None
    size = 0
    for chunk in stream:
        if not isinstance(chunk, AIMessageChunk):
            raise LlmUnavailable(f"unexpected model result {type(chunk).__name__}")
        size += len(chunk.content) if isinstance(chunk.content, str) else 0
        if size > MAX_ANSWER_CHARS:
            raise LlmUnavailable(f"Ollama stream cut: a reply over {MAX_ANSWER_CHARS:,} characters")
        if time.monotonic() > deadline:
            raise LlmUnavailable("Ollama unreachable or too slow: still answering past the investigation's time")
        joined = chunk if joined is None else joined + chunk
    if joined is None:
        raise LlmUnavailable("Ollama stream broken: no reply")
    return AIMessage(content=joined.content, tool_calls=joined.tool_calls, usage_metadata=joined.usage_metadata,
                     additional_kwargs=joined.additional_kwargs)


def _finite(value: Any) -> Any:
    """`value` with every infinite or NaN number written as text (`1e400` parses as infinity): the arguments go
    back to Ollama in the conversation, as JSON, which has no such numbers; the tool's check then refuses them.
    (A value no JSON holds, a Python literal langchain-ollama read from a string, fails its parse: a TypeError.)"""
    if type(value) is float and not math.isfinite(value):
        return str(value)
    if type(value) is dict:
        return {key: _finite(item) for key, item in value.items()}
    if type(value) is list:
        return [_finite(item) for item in value]
    return value


def _check_arguments(
    spec: Mapping[str, Any] | None, name: str, args: Mapping[str, Any], known: Sequence[str]
) -> tuple[dict[str, Any] | None, str]:
    """Arguments checked against the tool's schema (ints coerced), or None and a message for the model."""
    if spec is None:
        return None, f"unknown tool {name!r}; the tools are: {', '.join(known)}"
    if not isinstance(args, Mapping):
        return None, f"{name} takes a JSON object of arguments"
    params = spec["parameters"]
    properties: Mapping[str, Any] = params.get("properties", {})
    usage = f"{name}({', '.join(properties)}); required: {', '.join(params.get('required', [])) or 'none'}"
    unknown = sorted(set(args) - set(properties))
    if unknown:
        return None, f"unknown argument(s) {', '.join(map(repr, unknown))}; valid: {usage}"
    missing = [p for p in params.get("required", []) if args.get(p) is None]
    if missing:
        return None, f"missing argument(s) {', '.join(missing)}; valid: {usage}"
    checked: dict[str, Any] = {}
    for key, value in args.items():
        if value is None:
            continue
        kind = properties[key].get("type")
        if kind == "integer":
            try:
                checked[key] = int(value)
            except (TypeError, ValueError):
                return None, f"argument {key!r} must be an integer, got {str(value)[:40]!r}; valid: {usage}"
        elif kind == "string":
            if not isinstance(value, str):
                return None, f"argument {key!r} must be a string; valid: {usage}"
            checked[key] = value
        else:
            checked[key] = value
    return checked, ""


def _call_tool(tools: FileTools, name: str, args: Mapping[str, Any]) -> ToolResult[Any]:
    """Run a tool; the tools never raise by contract, and a bug there must not end the analysis either."""
    try:
        result: ToolResult[Any] = tools.as_callables()[name](**args)
    except Exception as exc:  # a tool bug becomes an error result the model can work around
        return ToolResult("error", f"{name} failed internally ({type(exc).__name__}); try another call")
    return result


def _record_read(run: _Run, asked: str, result: ToolResult[Any]) -> None:
    """Remember a file as read, under its real path and the name the model used."""
    real = getattr(result.data, "path", None)
    if isinstance(real, str) and real:
        run.reads.add(real)
    lexical = normalise_path(asked)
    if lexical is not None:
        run.reads.add(posixpath.normpath(lexical))


def _stop_notes(stats: AgentStats) -> list[str]:
    notes = {
        "step_cap": "the investigation hit the step cap",
        "timeout": "the investigation hit its time limit",
        "context_budget": "the investigation hit its context budget",
    }
    return [notes[stats.stop_reason]] if stats.stop_reason in notes else []


def _text(message: AIMessage | None) -> str:
    if message is None:
        return ""
    return message.content if isinstance(message.content, str) else str(message.content)


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = f"\n[output cut to {limit} characters of {len(text)}; narrow the call]"
    return text[: max(0, limit - len(marker))] + marker
