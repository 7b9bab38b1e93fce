"""A deployment as a topology of pools: each pool a role, a model, a device, TP/EP/DP and an instance count.

Each :class:`Pool` owns what one ``vllm serve`` per instance would own: its
deployment (model, device, tensor/expert/data parallel, EPLB, dual-batch
overlap: :data:`POOL_PARALLEL_KEYS`), memory plan, fitted
predictor and scheduler, all built by ``vidur_specdec.engine.simulation.prepare``
on the pool's own run config (:func:`pool_config`). A config without the
``disaggregation`` keys is the one-pool case: a ``mixed`` pool of
``parallel.num_replicas`` identical instances, run exactly as before. With
``disaggregation.prefill_instances`` and ``decode_instances`` set it is a
``prefill`` and a ``decode`` pool joined by a KV link
(:mod:`vidur_specdec.engine.kv_transfer`) and run by :mod:`vidur_specdec.engine.reference.disagg`.

Checks here, each refused in one line naming the key: a pool that does not fit
(memory, TP split), a key that does nothing with pools, and speculative configs
the two pools cannot share (vLLM's NIXL connector hashes the EAGLE/MTP
speculative config into its compatibility hash and refuses a handshake between
instances whose hashes differ: ``_get_speculative_compatibility_factors`` and
``compute_nixl_compatibility_hash`` in
``vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py``, checked in
``base_worker.py``, vLLM 0.33.0).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from vidur_specdec.config import ConfigError, RunConfig
from vidur_specdec.config.disaggregation import DisaggregationConfig
from vidur_specdec.config import unused
from vidur_specdec.config.schema import ACCEPTANCE_KEYS
from vidur_specdec.engine import kv_transfer
from vidur_specdec.engine.digest import plan_digest
from vidur_specdec.engine.resolve import from_dict

ROLES = ("prefill", "decode")
#: the ``parallel.*`` keys a pool sets for its instances (``disaggregation.<role>.<key>``; null: the run's)
POOL_PARALLEL_KEYS = ("enable_expert_parallel", "data_parallel_size", "enable_eplb", "num_redundant_experts",
                      "enable_dbo", "dbo_decode_token_threshold", "dbo_prefill_token_threshold")
#: vLLM 0.33 ``SpeculativeConfig.use_eagle()`` methods this simulator models: their config enters NIXL's hash
HASHED_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")
#: methods whose drafter keeps its own KV cache (what ``disaggregation.draft_kv`` is about)
DRAFT_KV_METHODS = ("eagle", "eagle3", "mtp", "draft_model")


@dataclass(frozen=True)
class Pool:
    """One pool of identical instances and everything it owns (a :class:`~vidur_specdec.engine.simulation.Prepared`)."""

    role: str  # prefill | decode | mixed
    instances: int
    prepared: object  # simulation.Prepared: deployment, memory plan, predictor and scheduler configs

    @property
    def deployment(self):
        return self.prepared.deployment

    @property
    def gpus(self) -> int:
        """GPUs of the whole pool: instances × data-parallel ranks × tensor-parallel size."""
        return self.instances * self.deployment.dp * self.deployment.tp

    def describe(self) -> Dict:
        """The pool in ``summary.json``: role, instances, model, device, TP, EP, DP (with EPLB's spare experts and
        dual-batch overlap), GPUs, KV blocks per GPU; a data-parallel pool's all-to-all source."""
        dep = self.deployment
        s = self.prepared.scheduler
        cfg = self.prepared.cfg.parallel
        out = {"role": self.role, "instances": self.instances, "model": dep.model.name, "device": dep.device.name,
               "tensor_parallel_size": dep.tp, "expert_parallel_size": dep.ep, "num_gpus": self.gpus,
               "kv_blocks_per_gpu": int(self.prepared.memory.num_blocks),
               "max_num_batched_tokens": s.chunk_size, "max_num_seqs": s.batch_size_cap}
        if dep.dp > 1:
            out.update(data_parallel_size=dep.dp, num_redundant_experts=dep.redundant_experts,
                       enable_dbo=bool(cfg.enable_dbo),
                       all_to_all=dep.kernels.all_to_all_source(dep.model, dep.ep))
        return out


@dataclass(frozen=True)
class Topology:
    """Pools in routing order (prefill first) and the KV link between them; ``specs`` the run's requests."""

    cfg: RunConfig
    pools: Tuple[Pool, ...]
    specs: Tuple = ()
    link: object = None  # kv_transfer.KVLink between prefill and decode pools
    warnings: Tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        """Content hash of the whole topology (:func:`vidur_specdec.engine.digest.plan_digest`)."""
        return plan_digest(self)

    def pool(self, role: str) -> Pool:
        return next(p for p in self.pools if p.role == role)

    @property
    def disaggregated(self) -> bool:
        return len(self.pools) > 1


def _rename(msg: str, role: str, keys: Dict[str, str]) -> str:
    """A pool's error with the run's key names replaced by the pool's."""
    hit = False
    for old, new in sorted(keys.items(), key=lambda kv: -len(kv[0])):
        if old in msg and not msg.startswith(new):
            hit = hit or msg.startswith(old)
            msg = msg.replace(old, new)
    return msg if hit else f"disaggregation.{role}: {msg}"


def _merge(base: Dict, over: Dict, where: str) -> None:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v, f"{where}.{k}")
        else:
            base[k] = copy.deepcopy(v)


def pool_config(cfg: RunConfig, role: str) -> RunConfig:
    """The run config one instance of pool ``role`` runs: the run's own with the pool's keys in place."""

    d = cfg.to_dict()
    if cfg.speculative.acceptance_source == "published":  # the library's rates stand; its other keys were never given
        for key in ACCEPTANCE_KEYS:
            if key != "acceptance_per_position":
                d["speculative"].pop(key, None)
    pc = getattr(cfg.disaggregation, role)
    d["disaggregation"] = dataclasses.asdict(DisaggregationConfig())
    d["parallel"]["num_replicas"] = getattr(cfg.disaggregation, f"{role}_instances")
    keys = {}
    if pc.tensor_parallel_size is not None:
        d["parallel"]["tensor_parallel_size"] = pc.tensor_parallel_size
        keys["parallel.tensor_parallel_size"] = f"disaggregation.{role}.tensor_parallel_size"
    for name in POOL_PARALLEL_KEYS:  # the pool's own DP, EP, EPLB and DBO (vLLM's engine arguments)
        v = getattr(pc, name)
        if v is not None:
            d["parallel"][name] = v
            keys[f"parallel.{name}"] = f"disaggregation.{role}.{name}"
    if pc.device is not None:
        d["device"] = pc.device
        keys["device"] = f"disaggregation.{role}.device"
    for name, alias in (("max_num_batched_tokens", "chunk_size"), ("max_num_seqs", "batch_size_cap")):
        v = getattr(pc, name)
        if v is not None:
            d["scheduler"][name] = d["scheduler"][alias] = v
            keys[f"scheduler.{name}"] = keys[f"scheduler.{alias}"] = f"disaggregation.{role}.{name}"
    if pc.speculative is not None:
        if not isinstance(pc.speculative, dict):
            raise ConfigError(f"disaggregation.{role}.speculative: must be a mapping of speculative.* keys, "
                              f"got {pc.speculative!r}")
        _merge(d["speculative"], pc.speculative, f"disaggregation.{role}.speculative")
        keys["speculative."] = f"disaggregation.{role}.speculative."
    keys.setdefault("parallel.tensor_parallel_size", f"disaggregation.{role}.tensor_parallel_size")
    try:
        # the run's own keys were checked when it loaded (a template rule may have kept some it does not read)
        kept = [k for k in unused.leaves(d) if not k.startswith("speculative.") or pc.speculative is None]
        out = from_dict(d, shared=kept)
    except ConfigError as e:
        raise ConfigError(_rename(str(e), role, keys)) from None
    out.base_dir = cfg.base_dir
    out._pool_keys = keys  # for renaming later errors (memory) of this pool
    return out


def refuse_pools(cfg: RunConfig, command: str) -> None:
    """One line for a command that does not model prefill/decode pools yet, given a config with them."""
    if cfg.disaggregation.enabled:
        raise ConfigError(f"disaggregation.prefill_instances: `{command}` does not model prefill and decode pools "
                          "yet; run it on the decode pool's config without the disaggregation keys")


def spec_factors(cfg: RunConfig) -> Optional[Dict]:
    """What vLLM 0.33's NIXL compatibility hash takes from a speculative config (None when it takes nothing)."""
    s = cfg.speculative
    if not s.enabled or s.method not in HASHED_METHODS:
        return None
    return {"method": s.method, "model": s.model, "kv_cache_dtype": cfg.kv_cache_dtype}


def _describe_spec(f: Optional[Dict]) -> str:
    if f is None:
        return "no EAGLE/MTP drafter"
    return f"method {f['method']}" + (f", model {f['model']}" if f["model"] else "")


def check(cfg: RunConfig) -> Dict[str, RunConfig]:
    """Every check of a disaggregated config that needs no fitting; ``{role: pool config}``."""
    d = cfg.disaggregation
    if cfg.parallel.num_replicas != 1:
        raise ConfigError("parallel.num_replicas: does nothing with disaggregation (its pools have "
                          "disaggregation.prefill_instances and decode_instances); allowed: 1")
    if cfg.parallel.global_scheduler != "round_robin":
        raise ConfigError("parallel.global_scheduler: does nothing with disaggregation; "
                          "use disaggregation.router")
    cfgs = {role: pool_config(cfg, role) for role in ROLES}
    fp, fd = spec_factors(cfgs["prefill"]), spec_factors(cfgs["decode"])
    if fp != fd:
        raise ConfigError(f"disaggregation.decode.speculative: the decode pool's speculative config "
                          f"({_describe_spec(fd)}) differs from the prefill pool's ({_describe_spec(fp)}); "
                          "vLLM's NIXL connector refuses to pair them (compatibility hash, "
                          "kv_connector/v1/nixl/metadata.py)")
    s = cfgs["decode"].speculative
    if d.draft_kv == "recompute" and not (s.enabled and s.method in DRAFT_KV_METHODS):
        raise ConfigError(f"disaggregation.draft_kv: recompute needs a drafter with its own KV cache "
                          f"({', '.join(DRAFT_KV_METHODS)}); the decode pool's speculative.method is "
                          f"{s.method if s.enabled else 'none'}")
    return cfgs


def prepare_topology(cfg: RunConfig, prepare) -> Topology:
    """Build each pool (memory plan, predictor, scheduler) and the KV link; ConfigError naming the pool's key.

    ``prepare`` is :func:`vidur_specdec.engine.simulation.prepare` (handed in: that module runs the pools).
    """

    cfgs = check(cfg)
    pools = []
    decode = None
    for role in ("decode", "prefill"):  # the decode pool draws the workload; the prefill pool reuses it
        pc = cfgs[role]
        specs = None
        if role == "prefill":  # a prefill instance runs each prompt with max_tokens=1 (vLLM's proxy)
            specs = [dataclasses.replace(s, output_tokens=1) for s in decode.specs]
        try:
            p = prepare(pc, specs=specs)
        except ConfigError as e:
            raise ConfigError(_rename(str(e), role, pc._pool_keys)) from None
        if role == "decode":
            decode = p
        pools.append(Pool(role, getattr(cfg.disaggregation, f"{role}_instances"), p))
    pools.reverse()
    top = Topology(cfg, tuple(pools), decode.specs)
    return dataclasses.replace(top, link=kv_transfer.build_link(cfg, top),
                               warnings=tuple(dict.fromkeys(w for p in pools for w in p.prepared.warnings)))
