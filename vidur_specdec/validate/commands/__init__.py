"""The sub-subcommands of ``python -m vidur_specdec validate``, one module each.

Each module exposes ``add_arguments(parser)`` and ``run(args) -> int``, as the
top-level subcommands do; :mod:`vidur_specdec.validate.cli` dispatches to them.
:mod:`~vidur_specdec.validate.commands.options` holds the options several of them
share, :mod:`~vidur_specdec.validate.commands.stages` the steps of the loop that
``replay``, ``calibrate``, ``compare`` and ``run`` share.
"""
