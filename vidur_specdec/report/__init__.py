"""The results explorer: ``python -m vidur_specdec report A.csv [B.csv ...] -o page.html``.

:mod:`.page` builds the self-contained page and the markdown tables; :mod:`.assets`
holds its stylesheet and script. The names below are :mod:`.page`'s, re-exported.
"""

from vidur_specdec.report.page import (  # noqa: F401 (re-exported)
    read_results,
    deployment_key,
    deployments,
    deployment_label,
    sweep_info,
    method_label,
    markdown_table,
    markdown_block,
    markdown_updated,
    update_markdown,
    build_page,
    write_page,
    add_arguments,
    run,
    main,
    REQUIRED,
    NUMERIC,
    INTEGER,
    DEPLOYMENT,
    KEEP,
    ATTENTION_LABELS,
    MD_BEGIN,
    MD_END,
)
