"""Lab checks: each says what is wrong and gives a hint, never a bare AssertionError.

One module per lab (``lab04`` for Lab 4); a notebook imports its lab's module as
``checks``::

    from rknnlab.checks import lab04 as checks
    checks.check_prealloc_variant(my_prealloc_variant)
    checks.summary()

A check takes what the student wrote (a variant, a function, an answer), runs real
measurements on the runtime at hand (the board's NPU, or the simulator), and returns a
:class:`CheckResult`.  A check never raises: a stub that raises ``NotImplementedError``
(or returns None) gives "not done yet", an error in the student's code is reported with
the line it came from, and the notebook runs on to the end.  In Jupyter a result shows
as a coloured box; as text it starts with ``PASSED`` or ``NOT PASSED``.  The shared
machinery is in ``rknnlab.checks._core`` (its docstring says how a lab module uses it).
"""
from ._core import CheckNotPassed, CheckResult

__all__ = ["CheckNotPassed", "CheckResult"]
