"""The ``benchloupe`` command line: the headless face of every feature (DESIGN.md, layer ``cli``).

``main`` parses and dispatches; one module per command family (``workspace``, ``transfer``, ``curation``,
``calibration``, ``audit``, ``coverage``, ``fill``) registers its subcommands and calls :mod:`benchloupe.jobs`;
``errors`` and ``output`` are the shared helpers. The only arrow into :mod:`benchloupe.tui` is ``open`` starting
the app, imported lazily.
"""
