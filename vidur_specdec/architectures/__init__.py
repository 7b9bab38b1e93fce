"""Model architectures: the shapes of the models the simulator knows.

:mod:`.models` holds the dense Llama-family :class:`~.models.ModelSpec`, the known
models by Hugging Face name and the readers of ``config.json`` / YAML files.
A new architecture lands in this folder. Imports only :mod:`vidur_specdec.config`
and :mod:`vidur_specdec.hardware`.
"""
