"""vLLM's engine defaults for the scheduler keys, by device, for online serving (``vllm serve``).

Followed: vLLM 0.33.0,

* ``vllm/engine/arg_utils.py``, ``EngineArgs.get_batch_defaults``: for
  ``UsageContext.OPENAI_API_SERVER`` (``vllm serve``) a GPU with >= 160 GiB
  takes ``max_num_batched_tokens`` 16384 and ``max_num_seqs`` 1024; one with
  >= 70 GiB whose name does not contain "a100" (H100, H200) 8192 and 1024;
  any other (A100 included) 2048 and 256.
* ``vllm/config/cache.py``, ``CacheConfig``: ``gpu_memory_utilization`` 0.92,
  ``DEFAULT_BLOCK_SIZE`` 16.

The config keeps its older names as aliases: ``scheduler.chunk_size`` is
``max_num_batched_tokens``, ``scheduler.batch_size_cap`` is ``max_num_seqs``
and ``scheduler.memory_margin_fraction`` is ``1 - gpu_memory_utilization``.
:func:`resolve` fills both names of each pair with the one value used.
"""

from __future__ import annotations

from typing import Tuple

from vidur_specdec.config.errors import ConfigError

VLLM_VERSION = "0.33.0"
GIB = 1024 ** 3
GPU_MEMORY_UTILIZATION = 0.92
BLOCK_SIZE = 16
# (name, alias, how the alias maps to the name and back)
ALIASES = (("max_num_batched_tokens", "chunk_size"), ("max_num_seqs", "batch_size_cap"))


def serve_batch_defaults(device) -> Tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) ``vllm serve`` picks on ``device`` (a DeviceSpec)."""
    mem = device.memory_bytes
    if mem >= 160 * GIB:
        return 16384, 1024
    if mem >= 70 * GIB and "a100" not in device.name.lower():
        return 8192, 1024
    return 2048, 256


def resolve(sched, device) -> None:
    """Fill the vLLM-named scheduler keys and their aliases with one value each (in place).

    A key given under both names must agree; a key given under neither takes
    vLLM's default for ``device``.
    """
    defaults = dict(zip(("max_num_batched_tokens", "max_num_seqs"), serve_batch_defaults(device)))
    for name, alias in ALIASES:
        a, b = getattr(sched, name), getattr(sched, alias)
        if a is not None and b is not None and a != b:
            raise ConfigError(f"scheduler.{name}: {a} disagrees with its alias scheduler.{alias} ({b}); "
                              "give one of them")
        v = a if a is not None else b if b is not None else defaults[name]
        setattr(sched, name, v)
        setattr(sched, alias, v)
    g, m = sched.gpu_memory_utilization, sched.memory_margin_fraction
    if g is not None and m is not None and abs((1.0 - g) - m) > 1e-9:
        raise ConfigError(f"scheduler.gpu_memory_utilization: {g:g} disagrees with "
                          f"scheduler.memory_margin_fraction ({m:g}, i.e. {1 - m:g}); give one of them")
    if g is None:
        g = round(1.0 - m, 12) if m is not None else GPU_MEMORY_UTILIZATION
    sched.gpu_memory_utilization = g
    sched.memory_margin_fraction = round(1.0 - g, 12)


PARTNERS = {f"scheduler.{a}": f"scheduler.{b}" for a, b in ALIASES + (("gpu_memory_utilization",
                                                                       "memory_margin_fraction"),)}
PARTNERS.update({b: a for a, b in PARTNERS.items()})
