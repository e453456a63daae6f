"""The ``kernelhouse`` command line: ``app.py`` (the typer app and its commands; the
console script is ``dagster_project.cli.app:main``), ``gpu.py`` (the ``gpu``
sub-commands), ``status.py`` (what ``kernelhouse status`` reports). Nothing is imported
here, so ``cli.status`` can be used without loading the whole app."""
