"""docs/profiles.md's builder-against-tables error block is what scripts/kernel_error.py writes now."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_kernel_error_table_is_current():
    mod = _script("kernel_error")
    text = (REPO / "docs" / "profiles.md").read_text()
    begin, end = mod.BEGIN, mod.END
    block = text[text.index(begin):text.index(end) + len(end)]
    assert block == mod.table(), "docs/profiles.md's kernel error table is stale: run python scripts/kernel_error.py --write"
