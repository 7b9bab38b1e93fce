"""Model architectures: the shapes of the models the simulator knows.

:mod:`.models` holds the dense Llama-family :class:`~.models.ModelSpec`, the known
models by Hugging Face name and the readers of ``config.json`` / YAML files.
A new architecture lands in this folder. Imports only :mod:`vidur_specdec.config`
and :mod:`vidur_specdec.hardware`.
"""

# The token mixers a layer plan may name, registered by their modules (architectures/layer_plan.py): imported
# here, in one explicit list, so every use of the registry sees all of them whatever was imported first (a
# Gemma-4-shaped ModelSpec built directly prices its global layers the same in a fresh process either way).
from vidur_specdec.architectures import layer_plan, gemma4, llama4  # noqa: E402,F401  (register their mixers)

MIXER_MODULES = (layer_plan, gemma4, llama4)
