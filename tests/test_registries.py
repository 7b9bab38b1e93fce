"""Registries are whole whatever was imported first: each is assembled in one explicit list.

A registry's members register themselves when their modules are imported; the
package that owns the registry imports all of them, in one list. So a registry
read in a fresh process right after importing only its own module holds the same
members as one read after the whole package, and a model built directly in
Python prices the same whichever modules a notebook happened to import.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO

# registry -> (the module that defines it, the expression listing its members)
REGISTRIES = {
    "token mixers": ("vidur_specdec.architectures.layer_plan", "sorted(m.MIXERS), sorted(m.COUNTERS)"),
    "proposers": ("vidur_specdec.speculation.proposers.base", "list(m.REGISTRY)"),
    "verify attention": ("vidur_specdec.costs.verify_cost", "list(m.REGISTRY)"),
    "all-reduce models": ("vidur_specdec.hardware.collectives", "list(m.ALL_REDUCE_MODELS)"),
    "kernel sources": ("vidur_specdec.costs.kernels", "list(m.KERNEL_SOURCES)"),
    "fused-MoE kernels": ("vidur_specdec.costs.fused_moe_table", "sorted(map(str, m.KERNELS))"),
    "links": ("vidur_specdec.hardware.links", "list(m.LINKS)"),
    "pool routers": ("vidur_specdec.engine.pool_routing", "list(m.ROUTERS)"),
    "warnings": ("vidur_specdec.engine.warnings", "[f.__name__ for f in m.WARNING_CHECKS]"),
}


def _members(first: str, module: str, expr: str) -> str:
    code = f"import importlib\n{first}\nm = importlib.import_module({module!r})\nprint(repr(({expr})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("name", sorted(REGISTRIES))
def test_a_registry_read_first_holds_what_the_whole_package_registers(name):
    module, expr = REGISTRIES[name]
    alone = _members("", module, expr)
    everything = _members("import vidur_specdec.main, vidur_specdec.engine.simulation, vidur_specdec.tune.cli",
                          module, expr)
    assert alone == everything


def test_every_proposer_module_is_in_the_explicit_list():
    from vidur_specdec.speculation import proposers

    helpers = {"base", "heads", "head_cost", "pairing", "__init__"}
    files = {p.stem for p in (REPO / "vidur_specdec/speculation/proposers").glob("*.py")} - helpers
    assert files == {m.__name__.rsplit(".", 1)[1] for m in proposers.PROPOSER_MODULES}


def test_a_gemma4_shaped_spec_built_directly_prices_alike_whatever_was_imported(tmp_path):
    from vidur_specdec.architectures.resolve import resolve_model

    path = tmp_path / "gemma4.json"
    path.write_text(json.dumps(resolve_model("google/gemma-4-26B-A4B").to_dict()))
    code = ("{first}\nimport dataclasses, json\nfrom vidur_specdec.architectures.spec import ModelSpec\n"
            f"d = json.load(open({str(path)!r}))\n"
            "s = ModelSpec(**{{k: v for k, v in d.items() if k in {{f.name for f in dataclasses.fields(ModelSpec)}}}})\n"
            "print(s.kv_bytes_per_token(1), s.kv_bytes_per_token(2))")
    got = {subprocess.run([sys.executable, "-c", code.format(first=first)], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()
           for first in ("", "import vidur_specdec.architectures.gemma4")}
    assert len(got) == 1, got
    assert got == {" ".join(str(resolve_model("google/gemma-4-26B-A4B").kv_bytes_per_token(t)) for t in (1, 2))}
