"""Pipeline parallelism: which layers each stage holds, what it sends to the next, and what that costs.

vLLM 0.33 splits a model's decoder layers over ``pipeline_parallel_size``
stages with ``get_pp_indices`` (``vllm/distributed/utils.py``): ``L // pp``
layers each, and when ``pp`` does not divide ``L`` the remainder goes one layer
each to the stages before the last (the last holds the final norm and LM head),
unless ``VLLM_PP_LAYER_PARTITION`` names the split. :func:`stage_layers`
reproduces the default split.

Between stages a non-last stage sends its ``IntermediateTensors`` to the next:
``hidden_states`` and ``residual`` (``[tokens, hidden]`` each, the model's bf16
activations; ``vllm/model_executor/models/llama.py``), plus, for EAGLE-3, the
auxiliary hidden states captured on this or an earlier stage that the drafter
on the last stage needs (``reserve_aux_intermediate_tensor_slots`` and
``PPHandler.relay_aux_hidden_states``, ``vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``
and ``vllm/v1/worker/gpu/pp_utils.py``; the default aux layers are
``(2, L // 2, L - 3)``, ``SupportsEagle3.get_eagle3_default_aux_hidden_state_layers``
in ``vllm/model_executor/models/interfaces.py``). ``send_tensor_dict`` with
``all_gather_group`` set sends each TP rank's ``1/tp`` slice point to point,
so a GPU sends ``bytes / tp`` (:func:`send_ms`).

Times in ms, sizes in bytes.
"""

from __future__ import annotations

from typing import Tuple

from vidur_specdec.hardware.links import LINKS

#: speculative methods whose drafter reads the target's auxiliary hidden states (vLLM 0.33
#: ``requires_aux_hidden_states``, ``vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``)
AUX_METHODS = ("eagle3", "dflash", "dspark")
GPUS_PER_NODE = 8  # an HGX/DGX node: stages whose GPUs sit in different nodes talk over the network
ACT_BYTES = 2  # bf16 activations (hidden_states, residual, EAGLE-3 aux states)


def stage_layers(num_layers: int, pp: int) -> Tuple[int, ...]:
    """Decoder layers of each stage, vLLM's default split (``get_pp_indices``, ``vllm/distributed/utils.py``)."""
    per = num_layers // pp
    parts = [per] * pp
    rem = num_layers % pp
    for i in range(2, rem + 2):  # one more layer each on the stages before the last
        parts[-i] += 1
    return tuple(parts)


def stage_range(num_layers: int, pp: int, stage: int) -> Tuple[int, int]:
    """``[start, end)`` layer indices of ``stage``."""
    parts = stage_layers(num_layers, pp)
    start = sum(parts[:stage])
    return start, start + parts[stage]


def eagle3_aux_layers(num_layers: int) -> Tuple[int, ...]:
    """vLLM's default EAGLE-3 auxiliary layers of a target with ``num_layers`` layers."""
    return (2, num_layers // 2, num_layers - 3)


def aux_states_sent(num_layers: int, pp: int, stage: int) -> int:
    """EAGLE-3 auxiliary hidden states ``stage`` sends on (captured on it or an earlier stage)."""
    end = stage_range(num_layers, pp, stage)[1]
    return sum(1 for layer in eagle3_aux_layers(num_layers) if layer < end)


def send_bytes(tokens: int, hidden: int, aux_states: int = 0) -> int:
    """Bytes a stage sends for ``tokens`` tokens: hidden states + residual (+ EAGLE-3 aux states)."""
    return tokens * hidden * ACT_BYTES * (2 + aux_states)


def link_of(stage: int, tp: int) -> str:
    """The link between ``stage`` and the next: NVLink inside a node, InfiniBand NDR across nodes."""
    return "infiniband_ndr" if ((stage + 1) * tp) % GPUS_PER_NODE == 0 else "nvlink"


def send_ms(device, nbytes: int, tp: int, stage: int) -> float:
    """One stage-to-stage send (ms): latency + ``nbytes / tp`` per GPU over the link between the stages.

    Link figures: :mod:`vidur_specdec.hardware.links` (NVLink from the project's NCCL
    fit scaled by the device's NVLink bandwidth; 400 Gb/s NDR per GPU across nodes).
    The receiver's all-gather of the ``tp`` slices (``send_tensor_dict``'s
    ``all_gather_group``) is left out (an underestimate).
    """
    bandwidth, latency_ms = LINKS[link_of(stage, tp)](device)
    return latency_ms + (nbytes / tp) / bandwidth * 1e3
