"""The MoE figures in the docs are what their scripts give now: the step ratio (docs/model.md), the held-out
fused-MoE errors and the builder against the measured tables (docs/profiles.md)."""

import importlib.util

from conftest import REPO


def _script(name="moe_step_ratio"):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_table_is_current():
    mod = _script()
    doc = (REPO / "docs" / "model.md").read_text()
    block = doc[doc.index(mod.BEGIN):doc.index(mod.END) + len(mod.END)]
    assert block == mod.table(), "docs/model.md's MoE step-ratio table is stale: run python scripts/moe_step_ratio.py --write"


def test_moe_step_grows_more_with_k_at_batch_one_than_dense():
    mod = _script()
    moe, dense = (mod.predictor(m, "h100") for m in mod.MODELS)
    ratio = lambda pred: mod.step(pred, 1, 5)[0] / mod.step(pred, 1, 0)[0]  # noqa: E731
    # the dense target's measured GEMMs (H100 tables) grow a few % from 1 to 6 rows; the MoE layer's woken experts far more
    assert ratio(moe) > 1.2 > 1.1 > ratio(dense)


def test_held_out_moe_layer_error_table_is_current():
    mod = _script("moe_layer_error")
    doc = (REPO / "docs" / "profiles.md").read_text()
    block = doc[doc.index(mod.BEGIN):doc.index(mod.END) + len(mod.END)]
    assert block == mod.table(), "docs/profiles.md's MoE error table is stale: run python scripts/moe_layer_error.py --write"


def test_builder_vs_measured_moe_table_is_current():
    mod = _script("moe_builder_vs_measured")
    doc = (REPO / "docs" / "profiles.md").read_text()
    block = doc[doc.index(mod.BEGIN):doc.index(mod.END) + len(mod.END)]
    assert block == mod.table(), ("docs/profiles.md's builder-vs-measured MoE table is stale: "
                                  "run python scripts/moe_builder_vs_measured.py --write")


def test_routing_figures_quoted_in_the_docs_are_the_models():
    """docs/model.md quotes the routing model's unique-expert ratios at K = 1, 4, 8 (256 experts, top 8)."""
    from vidur_specdec.costs.routing import expected_distinct

    doc = (REPO / "docs" / "model.md").read_text()
    for rho in (0.55, 0.0):
        base = expected_distinct([1], 256, 8, rho)
        quoted = ", ".join(f"{expected_distinct([k + 1], 256, 8, rho) / base:.2f}×" for k in (1, 4, 8))
        assert quoted in doc, f"docs/model.md should quote {quoted} for rho {rho}"
