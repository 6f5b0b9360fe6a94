"""The RKNN runtime C API as Python: structs and constants (abi), exceptions
(errors), the backend interface (Runtime) and numpy views (buffers)."""
from . import abi, buffers, errors
from .runtime import Runtime

__all__ = ["abi", "buffers", "errors", "Runtime"]
