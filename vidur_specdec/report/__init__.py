"""The results explorer: ``python -m vidur_specdec report A.csv [B.csv ...] -o page.html``.

:mod:`.results` reads a sweep's results CSV and names its deployments and proposers; :mod:`.page` builds the
self-contained page, :mod:`.markdown` the recorded tables (``--markdown``); :mod:`.assets` holds the page's
stylesheet and script. The names below are theirs, re-exported.
"""

from vidur_specdec.report.markdown import (  # noqa: F401 (re-exported)
    MD_BEGIN,
    MD_END,
    markdown_block,
    markdown_table,
    markdown_updated,
    update_markdown,
)
from vidur_specdec.report.page import add_arguments, build_page, main, run, sweep_info, write_page  # noqa: F401
from vidur_specdec.report.results import (  # noqa: F401 (re-exported)
    ATTENTION_LABELS,
    DEPLOYMENT,
    INTEGER,
    KEEP,
    NUMERIC,
    REQUIRED,
    deployment_key,
    deployment_label,
    deployments,
    method_label,
    read_results,
)
