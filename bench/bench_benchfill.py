"""BenchFill annotation throughput (issue 5): 16 children x 12 annotator models x 4 trials against a local
OpenAI-compatible server (tests/fake_llm.py) that sleeps 200 ms per request, issued one call at a time versus
through LLMAnnotator's bounded-concurrency pool.  Prints JSON.

    .venv/bin/python bench/bench_benchfill.py [--latency 0.2] [--repeat 3] [--sequential-repeat 1]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchloupe.engine.benchfill_types import AnnotationRequest, ChildDraft  # noqa: E402
from benchloupe.prompts.client import ChatClient, EndpointConfig  # noqa: E402
from benchloupe.prompts.llm import LLMAnnotator  # noqa: E402
from tests.fake_llm import KEY, FakeLLM, annotator_names  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--children", type=int, default=16)
    ap.add_argument("--models", type=int, default=12)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=8, help="per endpoint")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sequential-repeat", type=int, default=1)
    args = ap.parse_args()

    models = annotator_names(args.models)
    fake = FakeLLM({m: 0.0 for m in models}, latency=args.latency).start()
    try:
        kids = [fake.add_item(0.0) for _ in range(args.children)]
        requests = [AnnotationRequest(f"{k.item_id}/{m}/t{t}", k.item_id, m, t, ChildDraft(k.text, k.answer),
                                      "short")
                    for k in kids for m in models for t in range(args.trials)]
        clients = {m: ChatClient(EndpointConfig(fake.base_url, m, api_key=KEY, max_retries=0,
                                                concurrency=args.concurrency)) for m in models}
        annotator = LLMAnnotator(clients)

        def sequential() -> float:
            t0 = time.perf_counter()
            for r in requests:
                annotator._one(r)  # the same prompt and client path, one call at a time
            return time.perf_counter() - t0

        def parallel() -> float:
            t0 = time.perf_counter()
            n = sum(1 for _ in annotator.answer_many(requests))
            assert n == len(requests)
            return time.perf_counter() - t0

        par = [parallel() for _ in range(args.repeat)]
        seq = [sequential() for _ in range(args.sequential_repeat)]
    finally:
        fake.stop()
    out = {
        "bench": "benchfill_annotation", "calls": len(requests), "latency_s": args.latency,
        "children": args.children, "models": args.models, "trials": args.trials,
        "concurrency_per_endpoint": args.concurrency,
        "workers": min(len(requests), annotator.max_workers, args.concurrency * args.models),
        "sequential_s_best": min(seq), "sequential_runs": seq,
        "parallel_s_best": min(par), "parallel_runs": par,
        "speedup": min(seq) / min(par), "floor_sequential_s": len(requests) * args.latency,
        "python": platform.python_version(), "machine": platform.machine(),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
