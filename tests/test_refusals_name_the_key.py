"""A refusal names the key at fault: any config key (a pool's included) set to a value of the wrong kind or
out of its range is refused in one line that starts with that key, never another one, never a traceback."""

import dataclasses
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.engine.resolve import load


def _leaves(obj, prefix=""):
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            yield from _leaves(v, prefix + f.name + ".")
        else:
            yield prefix + f.name


KEYS = sorted(_leaves(RunConfig()))
POOL = [f"disaggregation.{r}.{k}" for r in ("prefill", "decode")
        for k in ("tensor_parallel_size", "enable_expert_parallel", "device", "max_num_batched_tokens", "max_num_seqs")]
BAD = st.sampled_from(["nope", -1, 3, 10 ** 9, 2.5, "1e400", [1, "x"], {"a": 1}, -0.5, 7])
BASE = {"model": "meta-llama/Llama-3.1-8B-Instruct", "device": "h100", "workload": {"num_requests": 5}}


@settings(max_examples=120)
@given(key=st.sampled_from(KEYS + POOL), value=BAD)
def test_a_bad_value_is_refused_naming_its_own_key(key, value):
    overrides = [f"{key}={json.dumps(value)}"]
    if key.startswith("disaggregation."):
        overrides += ["disaggregation.prefill_instances=1", "disaggregation.decode_instances=1"]
    try:
        load(BASE, overrides)
    except ConfigError as e:
        msg = str(e)
        assert "\n" not in msg
        head = msg.split(":")[0].split(" ")[0]
        # the key itself, a section holding it, or a key it sets together with (an alias or its pool's own name)
        assert key.startswith(head) or head.startswith(key) or key.rsplit(".", 1)[-1] in msg, (key, value, msg)
