"""Model families and owners from model ids (paper 002, Section 3.1 and Appendix C.1).

Families follow the paper's frozen model-name rules as implemented in the public reference
(REFERENCE-IMPLEMENTATIONS.md B.1): each regex is applied to the lower-cased model id and **exactly one**
pattern must match.  Two or more matches is "ambiguous" (e.g. ``DeepSeek-R1-Distill-Qwen`` matches both
``deepseek`` and ``qwen``) and the model is excluded; no match is "unmatched".  ``deepseek`` is in the pattern
set only to make such distillations ambiguous; it is not one of the default audit families.

Owners: Hugging Face ids look like ``owner/model`` and RouterEval ids like ``owner__model``.  The reference
splits on ``"__"`` only (RouterEval); its metabench conversion uses the part before ``"/"``.  We support both:
the owner is the text before the first ``"/"`` if present, else before the first ``"__"``, else the whole id,
always lower-cased.

``family_from_architecture`` maps the Open LLM Leaderboard ``arch`` column (e.g. ``LlamaForCausalLM``) to the
same family names, an alternative family source the paper does not use (it is name-based only).
"""

from __future__ import annotations

import re
from typing import Literal

#: Pattern set of the reference (B.1); order is the reference's.
FAMILY_PATTERNS: dict[str, re.Pattern[str]] = {
    "qwen": re.compile(r"qwen"),
    "llama": re.compile(r"llama"),
    "gemma": re.compile(r"gemma"),
    "mistral": re.compile(r"mistral|mixtral"),
    "deepseek": re.compile(r"deepseek"),
    "phi": re.compile(r"(^|[^a-z])phi[-_ .0-9]"),
}

#: The paper's audit families (deepseek only serves to flag ambiguity).
DEFAULT_FAMILIES: tuple[str, ...] = ("qwen", "llama", "gemma", "mistral", "phi")

Match = Literal["match", "ambiguous", "unmatched"]


def classify_family(model_id: str) -> tuple[Match, str | None]:
    """Apply the name rules; returns ``("match", family)``, ``("ambiguous", None)`` or ``("unmatched", None)``.

    A unique match on ``deepseek`` is returned as a match with family ``"deepseek"``; callers restricting to
    :data:`DEFAULT_FAMILIES` drop it like the reference does.
    """
    text = model_id.lower()
    hits = [name for name, pattern in FAMILY_PATTERNS.items() if pattern.search(text)]
    if len(hits) == 1:
        return "match", hits[0]
    if hits:
        return "ambiguous", None
    return "unmatched", None


def infer_family(model_id: str) -> str | None:
    """The family from the model id, or ``None`` when ambiguous, unmatched or not a default family."""
    status, family = classify_family(model_id)
    if status == "match" and family in DEFAULT_FAMILIES:
        return family
    return None


def infer_owner(model_id: str) -> str:
    """Owner (uploader) of a model id: before ``"/"`` (Hugging Face) or ``"__"`` (RouterEval), lower-cased."""
    text = model_id.strip()
    for separator in ("/", "__"):
        if separator in text:
            head = text.split(separator, 1)[0]
            if head:
                return head.lower()
    return text.lower()


_ARCH_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("qwen", re.compile(r"^qwen")),
    ("llama", re.compile(r"^llama")),
    ("gemma", re.compile(r"^gemma")),
    ("mistral", re.compile(r"^(mistral|mixtral)")),
    ("phi", re.compile(r"^phi")),
)


def family_from_architecture(arch: str | None) -> str | None:
    """Family from a leaderboard architecture class name (``Qwen2ForCausalLM`` -> ``qwen``), else ``None``.

    Matches the start of the lower-cased class name, so ``Phi3ForCausalLM`` is phi and ``PhiMoE`` too;
    architectures outside the five default families (GPT-2, Falcon, ...) give ``None``.
    """
    if not arch or not isinstance(arch, str):
        return None
    text = arch.strip().lower()
    for family, pattern in _ARCH_PATTERNS:
        if pattern.search(text):
            return family
    return None
