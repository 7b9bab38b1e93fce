"""What one drafter pass costs, by part (ms), as the simulator prices vLLM's drafting.

Target Llama-3.1-8B-Instruct on one H100 (shipped or built profiles), k = 4,
every request decoding at context 1024 and having had 1 + 4 tokens charged in
its previous step (vLLM's padded first pass). For EAGLE, EAGLE-3, MTP (one
module at the target's shape) and a Llama-3.2-1B draft model, at decode batch
1 and 64, it prints the first pass (catch-up tokens) and a later pass (one token
per request) split into: ``layers`` (linear ops + attention of the drafter's
layers), ``all_reduce`` (0 at TP 1), ``fc`` (EAGLE's input projection),
``lm_head``, ``sample`` (argmax of the guesses), ``vocab_map`` (EAGLE-3's
draft-to-target mapping), ``aux_hidden`` (EAGLE-3's three target hidden
states), ``launch`` (CUDA-graph replay) and ``prepare`` (input preparation),
then the step's whole ``draft_ms`` (first pass + three later ones).

    python benchmarks/bench_draft_pass.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vidur_specdec.engine import deployment  # noqa: E402
from vidur_specdec.pricing.plan import StepComposition  # noqa: E402
from vidur_specdec.engine.resolve import load, priced, resolve  # noqa: E402
from vidur_specdec.hardware.collectives import all_reduce_model  # noqa: E402
from vidur_specdec.speculation.proposers.base import ProposerContext  # noqa: E402
from vidur_specdec.speculation.proposers.head_cost import draft_passes  # noqa: E402

TARGET, K, CTX = "meta-llama/Llama-3.1-8B-Instruct", 4, 1024
PARTS = ("layers", "all_reduce", "fc", "lm_head", "sample", "vocab_map", "aux_hidden", "launch", "prepare")
METHODS = [("EAGLE", {"method": "eagle"}), ("EAGLE-3", {"method": "eagle3"}), ("MTP", {"method": "mtp"}),
           ("Llama-3.2-1B draft", {"method": "draft_model", "draft_model": "meta-llama/Llama-3.2-1B-Instruct"})]


def proposer(spec):
    cfg = load({"model": TARGET, "device": "h100", "speculative": {**spec, "num_speculative_tokens": K}})
    dep = resolve(cfg).deployment
    _, prop, _ = priced(cfg, dep, deployment.longest_request_tokens(cfg))
    prop.bind(ProposerContext(dep.device, dep.tp, all_reduce_model(cfg.engine.all_reduce)))
    return prop, dep


def parts(prop, dep, p, first):
    if hasattr(prop, "head"):
        return prop.pass_parts(p, first, dep.device, dep.tp)
    return prop.pass_parts(p, first)


def main() -> int:
    print(f"{TARGET}, H100, TP 1, k = {K}, context {CTX}; ms per pass")
    print("| drafter | batch | pass | " + " | ".join(PARTS) + " | pass total | step draft_ms |")
    print("|---|---:|---|" + "---:|" * (len(PARTS) + 2))
    for name, spec in METHODS:
        prop, dep = proposer(spec)
        for batch in (1, 64):
            comp = StepComposition(batch * (K + 1), [K + 1] * batch, [CTX] * batch, [], [K + 1] * batch,
                                   [K + 1] * batch)
            passes = draft_passes(comp)
            step = prop.step_time_ms(comp)
            for label, p, first in (("first", passes[0], True), ("later", passes[1], False)):
                d = parts(prop, dep, p, first)
                cells = " | ".join(f"{d.get(x, 0.0):.3f}" for x in PARTS)
                print(f"| {name} | {batch} | {label} | {cells} | {sum(d.values()):.3f} | "
                      f"{step:.2f} |" if label == "first" else
                      f"| {name} | {batch} | {label} | {cells} | {sum(d.values()):.3f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
