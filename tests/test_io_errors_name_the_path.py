"""An I/O error names the user's path: a full disk (or a file-size limit) while writing is
``error: <path>: No space left on device`` / ``File too large``, naming the file being written, never a
temporary sibling and never no path at all; nothing half-written is left behind."""

import errno
import os
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from vidur_specdec.console import _os_error_text

LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # the write fails with EFBIG instead of killing the process
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from vidur_specdec.cli import main
sys.exit(main({argv!r}))
"""


@pytest.mark.parametrize("command,target", [
    (["run", "--config", "configs/default.yaml", "--set", "workload.num_requests=30", "--output-dir", "{d}/out"],
     "{d}/out/requests.csv"),
    (["validate", "generate", "--config", "configs/default.yaml", "--out", "{d}/t.csv"], "{d}/t.csv"),
])
def test_a_write_past_the_file_size_limit_names_the_file(tmp_path, command, target):
    argv = [a.format(d=tmp_path) for a in command]
    r = subprocess.run([sys.executable, "-c", LIMITED.format(limit=2000, argv=argv)], cwd=REPO,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert lines == [f"error: {target.format(d=tmp_path)}: File too large"], r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing half-written, no temporary left


def _writers(d):
    from vidur_specdec.costs.profiles import write_tables
    from vidur_specdec.report.results import write_text_atomic
    from vidur_specdec.sweep.table import atomic_write
    from vidur_specdec.validate.common import write_csv, write_text

    df = pd.DataFrame({"a": [1, 2]})
    return {"validate text": (lambda: write_text(d / "x.json", "{}"), d / "x.json"),
            "validate csv": (lambda: write_csv(d / "x.csv", df), d / "x.csv"),
            "sweep table": (lambda: atomic_write(d / "s.csv", "row\n"), d / "s.csv"),
            "report page": (lambda: write_text_atomic(d / "p.html", "<p>"), d / "p.html"),
            "profile": (lambda: write_tables(df, df, d), d / "mlp.csv")}


@settings(max_examples=20)
@given(which=st.sampled_from(["validate text", "validate csv", "sweep table", "report page", "profile"]),
       code=st.sampled_from([errno.ENOSPC, errno.EFBIG, errno.EIO, errno.EDQUOT]), existing=st.booleans())
def test_every_writer_names_its_file_when_the_disk_fails(tmp_path_factory, which, code, existing):
    d = tmp_path_factory.mktemp("w")
    write, path = _writers(d)[which]
    if existing:
        path.write_text("before\n")
    real = os.replace

    def failing(src, dst):
        raise OSError(code, os.strerror(code))  # as a full disk: no file named

    os.replace = failing
    try:
        with pytest.raises(OSError) as e:
            write()
    finally:
        os.replace = real
    assert e.value.errno == code and _os_error_text(e.value) == f"{path}: {os.strerror(code)}"
    assert sorted(p.name for p in d.iterdir()) == ([path.name] if existing else [])  # no temporary left
    if existing:
        assert path.read_text() == "before\n"
