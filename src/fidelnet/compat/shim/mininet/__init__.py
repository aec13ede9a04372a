"""fidelnet's stand-in for the ``mininet`` package: each module re-exports
``fidelnet.compat.<module>``. It is importable only when fidelnet puts its
directory on ``sys.path`` (``fidelnet mn``, ``fidelnet compat-path``). An uncaught
fidelnet error ends a script with its one-line message
(:mod:`fidelnet.compat._errors`)."""

from fidelnet.compat import _errors

_errors.install()

FIDELNET = True
