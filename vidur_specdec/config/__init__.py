"""The config layer: the run-config schema, its files and its errors. The bottom of the package.

Pure dataclasses with their ranges (:mod:`.schema`, :mod:`.fields`), YAML files
and ``--set`` overrides (:mod:`.files`), relative paths (:mod:`.paths`), the one
bad-input exception (:mod:`.errors`) and the registries through which the layers
above supply allowed values (:mod:`.registry`). Imports nothing else of the
package. Reading a config here checks the schema only; :func:`vidur_specdec.load`
also resolves it (models, device, TP, speculation) with every cross-field check.
"""

from vidur_specdec.config.errors import ConfigError  # noqa: F401
from vidur_specdec.config.files import (  # noqa: F401
    apply_overrides,
    override_list,
    parse_set,
    parse_yaml_text,
    read_yaml,
    set_dotted,
)
from vidur_specdec.config.paths import PATH_KEYS, resolve_path, resolve_paths  # noqa: F401
from vidur_specdec.config.schema import (  # noqa: F401
    DEFAULT_ALL_REDUCE,
    GLOBAL_SCHEDULERS,
    LENGTH_DISTS,
    MAX_K,
    TP_SIZES,
    EngineConfig,
    LengthDist,
    ParallelConfig,
    PredictorConfig,
    RunConfig,
    SchedulerConfig,
    SpeculativeConfig,
    WorkloadConfig,
    build_config,
    read_config,
)
