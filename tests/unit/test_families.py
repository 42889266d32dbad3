"""Family and owner rules of paper 002, Appendix C.1 (reference B.1 and its classifier test cases)."""

import pytest

from benchloupe.engine.families import (
    DEFAULT_FAMILIES,
    classify_family,
    family_from_architecture,
    infer_family,
    infer_owner,
)


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", ("ambiguous", None)),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", ("match", "mistral")),
        ("mistralai/Mistral-7B-v0.1", ("match", "mistral")),
        ("meta-llama/Llama-2-7b-hf", ("match", "llama")),
        ("Qwen/Qwen1.5-7B", ("match", "qwen")),
        ("google/gemma-7b", ("match", "gemma")),
        ("microsoft/phi-2", ("match", "phi")),
        ("microsoft/Phi-3-mini-4k-instruct", ("match", "phi")),
        ("someone/dolphin-2", ("unmatched", None)),  # "phi" inside a word is not Phi
        ("someone/philosophy-7b", ("unmatched", None)),  # phi must be followed by - _ . space or a digit
        ("someone/llama-qwen-merge", ("ambiguous", None)),
        ("EleutherAI/gpt-j-6b", ("unmatched", None)),
    ],
)
def test_classify_family(model_id, expected):
    assert classify_family(model_id) == expected


def test_infer_family_drops_ambiguous_and_non_default():
    assert infer_family("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B") is None
    assert infer_family("deepseek-ai/deepseek-llm-7b-base") is None  # unique match but not a default family
    assert infer_family("mistralai/Mixtral-8x7B-v0.1") == "mistral"
    assert set(DEFAULT_FAMILIES) == {"qwen", "llama", "gemma", "mistral", "phi"}


def test_owner_from_hf_and_routereval_ids():
    assert infer_owner("meta-llama/Llama-2-7b") == "meta-llama"
    assert infer_owner("TheBloke__Llama-2-7B-GPTQ") == "thebloke"
    assert infer_owner("Org/model__variant") == "org"  # "/" wins over "__"
    assert infer_owner("gpt2") == "gpt2"


def test_family_from_architecture():
    assert family_from_architecture("LlamaForCausalLM") == "llama"
    assert family_from_architecture("MixtralForCausalLM") == "mistral"
    assert family_from_architecture("Qwen2ForCausalLM") == "qwen"
    assert family_from_architecture("Phi3ForCausalLM") == "phi"
    assert family_from_architecture("GemmaForCausalLM") == "gemma"
    assert family_from_architecture("GPT2LMHeadModel") is None
    assert family_from_architecture(None) is None
