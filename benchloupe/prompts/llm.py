"""BenchFill's Rewriter, Judge and Annotator (engine protocols) over OpenAI-compatible endpoints.

Model output is parsed defensively: code fences and prose around JSON are ignored, a truncated JSON reply
keeps every child object that was complete, and a reply with nothing usable becomes a one-line
:class:`LLMFailure` (not fatal: the loop records it and goes on) or, for the judge, an invalid verdict.
Annotation calls for many (child, model, trial) triples run in a thread pool; each endpoint's own semaphore
bounds its concurrency, and replies are yielded in the caller's thread as they complete.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from benchloupe.engine.benchfill_types import (
    AnnotationReply,
    AnnotationRequest,
    AnswerFormat,
    ChildDraft,
    FillItem,
    GradeReply,
    LLMFailure,
    RewriteReply,
    RewriteRequest,
    VerdictReply,
)
from benchloupe.prompts.client import ChatClient
from benchloupe.prompts.templates import PromptTemplate, load_template

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)


# ------------------------------------------------------------------------------------------- parsing


MAX_STARTS = 1000
MAX_OBJECT_DEPTH = 8  # a child object sits one or two levels down; deeper ones are not salvaged (issue 24)


def _outside_strings(text: str, start: int = 0, end: int | None = None) -> Iterator[int]:
    """Positions in text[start:end] of the characters outside JSON strings, each string's opening and closing quote
    included (what a string holds, escaped quotes too, is skipped)."""
    in_str = esc = False
    for i in range(start, len(text) if end is None else end):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
                yield i
        else:
            in_str = ch == '"'
            yield i


def _balanced_objects(text: str) -> Iterator[str]:
    """Every balanced {...} substring at most :data:`MAX_OBJECT_DEPTH` braces deep, innermost last, honouring JSON
    strings and escapes (a reply of 100,000 nested braces is one linear pass, not 100,000 long copies)."""
    stack: list[int] = []
    for i in _outside_strings(text):
        ch = text[i]
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            start = stack.pop()
            if len(stack) < MAX_OBJECT_DEPTH:
                yield text[start: i + 1]


def parse_json_loose(text: str) -> Any | None:
    """The first JSON value in the text (fences and prose ignored), or None."""
    cleaned = _FENCE.sub("", text).strip()
    decoder = json.JSONDecoder()
    starts = (i for i, ch in enumerate(cleaned) if ch in "{[")
    for start in itertools.islice(starts, MAX_STARTS):  # a reply whose first 1,000 brackets start no JSON has none
        try:
            return decoder.raw_decode(cleaned, start)[0]
        except ValueError:  # not JSON here, or a 5,000-digit number
            continue
        except RecursionError:  # nested past what the parser follows: not a usable reply, whatever follows
            return None
    return None


def _child_from(obj: Any) -> ChildDraft | None:
    if not isinstance(obj, dict):
        return None
    text = obj.get("question", obj.get("text", obj.get("item")))
    answer = obj.get("answer", obj.get("reference_answer"))
    if not isinstance(text, str) or answer is None or isinstance(answer, (dict, list)):
        return None
    raw = obj.get("choices", obj.get("options", ()))
    if isinstance(raw, dict):
        raw = [raw[k] for k in sorted(raw)]
    choices = tuple(str(c) for c in raw) if isinstance(raw, list) else ()
    return ChildDraft(text.strip(), str(answer).strip(), choices)


def parse_children(text: str) -> list[ChildDraft]:
    """Children from a rewriter reply: {"children": [...]}, a bare list, or every complete child object left
    in a truncated or prose-wrapped reply (whichever reading finds more)."""
    value = parse_json_loose(text)
    if isinstance(value, dict):
        value = value.get("children", value.get("items", [value]))
    structured = [c for c in map(_child_from, value) if c is not None] if isinstance(value, list) else []
    salvaged: list[ChildDraft] = []
    for chunk in _balanced_objects(_FENCE.sub("", text)):
        try:
            child = _child_from(json.loads(chunk))
        except (ValueError, RecursionError):
            continue
        if child is not None and child not in salvaged:
            salvaged.append(child)
    return salvaged if len(salvaged) > len(structured) else structured


def _untrusted_fragments(untrusted: Sequence[str]) -> list[str]:
    """The texts the model under judgement wrote (the child's question, options and answer; an annotator's
    response), fences removed, with each of their lines that holds a brace: what a judge
    may restate whole or in part, and what must never contribute a verdict (issue 37 #6)."""
    out: set[str] = set()
    for text in untrusted:
        text = _FENCE.sub("", text or "")
        if text.strip():
            out.add(text.strip())
        for line in text.splitlines():
            line = line.strip()
            if len(line) >= 3 and ("{" in line or "}" in line):
                out.add(line)
    return sorted(out, key=len, reverse=True)


def _occurrences(text: str, fragments: Sequence[str]) -> list[tuple[int, int]]:
    """Spans of every verbatim occurrence of each fragment in the text."""
    spans = []
    for frag in fragments:
        start = text.find(frag)
        while start >= 0 and len(spans) < 10_000:
            spans.append((start, start + len(frag)))
            start = text.find(frag, start + 1)
    return spans


def _structure(text: str, start: int, end: int) -> Iterator[int]:
    """Positions of the JSON object text[start:end]'s structural characters: braces, brackets, colons, commas,
    literals, and the quotes that open and close its strings (not what its strings hold)."""
    return (i for i in _outside_strings(text, start, end) if not text[i].isspace())


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _objects_in(text: str) -> Iterator[tuple[int, int, Any]]:
    """Every JSON object decodable at some brace of the text (the last :data:`MAX_STARTS` braces): (start, end,
    value), in order of start; nested objects too."""
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(text) if ch == "{"][-MAX_STARTS:]
    for start in starts:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        except RecursionError:
            return
        yield start, end, value


def parse_verdict(text: str, key: str, untrusted: Sequence[str] = ()) -> dict | None:
    """The judge's own verdict object: the last JSON object in its reply with a boolean ``key`` that the text
    under judgement did not write (issue 37 #6: the first object was taken, and a child item that carried
    ``{"valid": true}``, restated by the judge before its own ``{"valid": false}``, was stored valid).

    An object is the child's, not the judge's, when any of its structural characters (braces, colons,
    commas, literals, string quotes) lies inside a verbatim restatement of the child's text or of one of its
    lines, or when it equals (as JSON) an object that the child's text holds. A fake fence, a forged
    verdict, an object cut in half to swallow the judge's own: each is skipped, and a reply with no verdict
    of the judge's own is unparsed (the child is then invalid: the parser fails closed)."""
    cleaned = _FENCE.sub("", text)
    fragments = _untrusted_fragments(untrusted)
    spans = _occurrences(cleaned, fragments)
    forged = {_canonical(v) for frag in fragments for _, _, v in _objects_in(frag) if isinstance(v, dict)}
    found = None
    for start, end, value in _objects_in(cleaned):
        if not isinstance(value, dict) or not isinstance(value.get(key), bool) or _canonical(value) in forged:
            continue
        if spans and any(a <= i < b for i in _structure(cleaned, start, end) for a, b in spans):
            continue
        found = value
    return found


def _parse_flag(text: str, key: str, yes: str, no: str, untrusted: Sequence[str] = ()) -> tuple[bool | None, str]:
    """(verdict, reason) from a judge or grader reply: its own JSON object (:func:`parse_verdict`); failing that,
    a bare ``key: true`` or a lone YES/NO word in what is left once every restatement of the untrusted text is
    blanked out (never a word or pair the child wrote); None when nothing or both are found."""
    value = parse_verdict(text, key, untrusted)
    if value is not None:
        return value[key], str(value.get("reason") or "")
    rest = _FENCE.sub("", text)
    for frag in sorted({f.strip() for u in untrusted for f in (_FENCE.sub("", u or ""), *(u or "").splitlines())
                        if f.strip()}, key=len, reverse=True):
        rest = rest.replace(frag, " ")
    theirs = set(re.findall(r"[A-Za-z]+", " ".join(untrusted).upper()))
    pairs = {m.lower() for m in re.findall(rf'"?{key}"?\s*[:=]\s*"?(true|false)', rest, re.IGNORECASE)}
    if len(pairs) == 1:
        return pairs.pop() == "true", ""
    if pairs:
        return None, ""
    words = set(re.findall(r"[A-Za-z]+", rest.upper()))
    if (no in words) != (yes in words) and not {yes, no} & theirs:
        return yes in words, ""
    return None, ""


def _snippet(text: str) -> str:
    return repr(" ".join(text.split())[:80])


def _choices_block(choices: Sequence[str]) -> str:
    return "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))


# ------------------------------------------------------------------------------------ implementations


_FORMAT_RULES = {
    "short": "Each answer is a short final answer (a number, word or expression), like the parent's.",
    "choice": "Each item is multiple choice with the same number of options as the parent; give the options "
              "as a list and the answer as the letter of the correct option.",
    "free": "Each answer is a complete reference answer in the parent's style.",
}


class LLMRewriter:
    """Rewriter G of Algorithm 2 over one chat endpoint and the ``rewriter`` template."""

    def __init__(self, client: ChatClient, template: PromptTemplate | None = None):
        self.client = client
        self.template = template or load_template("rewriter")

    @staticmethod
    def _show(item: FillItem) -> str:
        block = item.text if not item.choices else f"{item.text}\n{_choices_block(item.choices)}"
        return f"{block}\nAnswer: {item.answer}"

    def rewrite(self, request: RewriteRequest) -> RewriteReply:
        refs = "\n".join(f"- [{d:.1f}] {self._show(it)}".replace("\n", "\n  ") for it, d in request.references)
        messages = self.template.render(
            target=f"{request.target_display:.1f}", parent_difficulty=f"{request.parent_display:.1f}",
            references=refs or "(none)", parent=self._show(request.parent), n_children=request.n_children,
            format_rule=_FORMAT_RULES[request.answer_format],
            choices_field=', "choices": ["...", "..."]' if request.answer_format == "choice" else "")
        reply = self.client.chat(messages, request.tag, json_reply=True)
        if not reply.text.strip():
            raise LLMFailure("rewriter returned an empty reply", fatal=False, calls=reply.calls)
        kids = parse_children(reply.text)
        if not kids:
            cut = " (truncated at max_tokens)" if reply.truncated else ""
            raise LLMFailure(f"rewriter reply had no parseable child items{cut}: {_snippet(reply.text)}",
                             fatal=False, calls=reply.calls)
        return RewriteReply(tuple(kids[: request.n_children]), reply.calls)


def _written_by(child: ChildDraft) -> tuple[str, ...]:
    """What the rewriter wrote into a child: the texts a judge's verdict may never be read from."""
    return (child.text, child.answer, *child.choices)


class LLMJudge:
    """Validity judge J (Algorithm 2 line 13) and grader of free-form answers."""

    def __init__(self, client: ChatClient, judge_template: PromptTemplate | None = None,
                 grading_template: PromptTemplate | None = None):
        self.client = client
        self.judge_template = judge_template or load_template("judge")
        self.grading_template = grading_template or load_template("grading")

    def verify(self, child: ChildDraft, parent: FillItem, tag: str) -> VerdictReply:
        messages = self.judge_template.render(question=child.text, choices=_choices_block(child.choices),
                                              answer=child.answer)
        reply = self.client.chat(messages, tag, json_reply=True)
        valid, reason = _parse_flag(reply.text, "valid", "VALID", "INVALID", _written_by(child))
        if valid is None:
            return VerdictReply(False, f"judge reply could not be parsed: {_snippet(reply.text)}", reply.calls)
        return VerdictReply(valid, reason or ("valid" if valid else "judged invalid"), reply.calls)

    def grade(self, child: ChildDraft, response: str, tag: str) -> GradeReply:
        messages = self.grading_template.render(question=child.text, choices=_choices_block(child.choices),
                                                answer=child.answer, response=response)
        reply = self.client.chat(messages, tag, json_reply=True)
        correct, _ = _parse_flag(reply.text, "correct", "CORRECT", "INCORRECT", (*_written_by(child), response))
        return GradeReply(bool(correct), reply.calls)


_INSTRUCTIONS: Mapping[AnswerFormat, str] = {
    "short": "Give your final answer on the last line as 'Answer: <answer>'.",
    "choice": "Give the letter of the correct option on the last line as 'Answer: <letter>'.",
    "free": "Give your final answer.",
}


class LLMAnnotator:
    """Annotator models M_j, each on its own endpoint; calls run concurrently, bounded per endpoint."""

    def __init__(self, clients: Mapping[str, ChatClient], template: PromptTemplate | None = None,
                 max_workers: int = 64):
        self.clients = dict(clients)
        self.template = template or load_template("annotate")
        self.max_workers = max_workers

    def _one(self, request: AnnotationRequest) -> AnnotationReply:
        client = self.clients[request.model]
        messages = self.template.render(question=request.child.text,
                                        choices=_choices_block(request.child.choices),
                                        instruction=_INSTRUCTIONS[request.answer_format])
        reply = client.chat(messages, request.tag)
        return AnnotationReply(request, reply.text, reply.calls)

    def answer_many(self, requests: Sequence[AnnotationRequest]) -> Iterator[AnnotationReply]:
        missing = sorted({r.model for r in requests} - set(self.clients))
        if missing:
            raise LLMFailure(f"no endpoint configured for annotator model(s) {', '.join(missing)}", fatal=True)
        if not requests:
            return
        workers = min(len(requests), self.max_workers,
                      sum(self.clients[m].concurrency for m in {r.model for r in requests}))
        pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="annotate")
        try:
            pending: set[Future[AnnotationReply]] = {pool.submit(self._one, r) for r in requests}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                failures = [f.exception() for f in done if f.exception() is not None]
                for future in done:
                    if future.exception() is None:
                        yield future.result()
                if failures:
                    raise failures[0]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # in-flight calls finish; queued ones never start
