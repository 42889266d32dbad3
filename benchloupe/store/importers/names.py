"""Model names and item keys as harnesses write them, turned into identities that line up across tools.

Provider prefixes: Inspect AI names a model ``provider/model`` (``mockllm/model``, ``vllm/meta-llama/...``,
``openai/gpt-4o``, ``openai-api/<service>/<model>``, ``openrouter/<org>/<model>``). The provider says how the
model was served, not who made it, so it is stripped for the model's identity (and so for the family and
owner inferred from it): ``vllm/meta-llama/Llama-3.1-8B`` is ``meta-llama/Llama-3.1-8B`` (owner meta-llama);
an API provider that made the model is its owner (``openai/gpt-4o`` is ``gpt-4o``, owner openai). The full
name is kept as an alias, so importing either spelling finds the same model. Only Inspect names carry
providers: lm-eval names are Hugging Face ids (``google/gemma-2-9b``: google is the owner, not a provider)
and are kept as they are.
"""

from __future__ import annotations

PROVIDERS = {
    "mockllm", "vllm", "hf", "openai", "anthropic", "google", "mistral", "grok", "groq", "together", "fireworks",
    "bedrock", "azureai", "cloudflare", "vertex", "ollama", "llama-cpp-python", "sglang", "transformer_lens",
    "perplexity", "goodfire", "deepseek", "hf-inference-providers", "nnterp", "openrouter", "openai-api", "none",
}
TWO_LEVEL = {"openai-api"}  # openai-api/<service>/<model>
# API providers that also made the model: the provider is the owner (``openai/gpt-4o`` -> gpt-4o, owner openai).
MAKERS = {"openai": "openai", "anthropic": "anthropic", "google": "google", "mistral": "mistralai", "grok": "xai",
          "deepseek": "deepseek", "perplexity": "perplexity"}


def split_provider(name: str) -> tuple[str, str | None]:
    """(identity, provider) of a model name; provider None when the name has no known provider prefix."""
    head, sep, rest = name.partition("/")
    if not sep or head.lower() not in PROVIDERS or not rest:
        return name, None
    if head.lower() in TWO_LEVEL:
        _, sep2, model = rest.partition("/")
        if sep2 and model:
            return model, head
    return rest, head


def model_row(name: str) -> dict:
    """A ParsedImport.models row for a harness model name: identity, aliases [full name], provider metadata."""
    identity, provider = split_provider(name)
    if provider is None:
        return {"name": name, "owner": None, "aliases": [], "metadata": {}}
    owner = MAKERS.get(provider.lower()) if "/" not in identity else None
    return {"name": identity, "owner": owner, "aliases": [name],
            "metadata": {"provider": provider, "harness_name": name}}


def dotted(obj, path: str):
    """``obj["a"]["b"]`` for ``path`` "a.b" (list indices as numbers); KeyError when a step is missing."""
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise KeyError(path)
    return cur


def key_text(value) -> str | None:
    """An item key from a JSON value: strings and whole numbers; None for anything else (or blank)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (str, int)):
        s = str(value).strip()
        return s or None
    return None


def harness_models(names: list[str]):
    """The ParsedImport.models frame for harness model names (identity, aliases, metadata)."""
    import pandas as pd

    rows = [model_row(n) for n in names]
    return pd.DataFrame({"name": [r["name"] for r in rows], "family": None, "owner": [r["owner"] for r in rows],
                         "aliases": [r["aliases"] for r in rows], "metadata": [r["metadata"] for r in rows]},
                        dtype=object)
