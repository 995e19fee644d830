"""The package version: the C++ library's DISTTRAIN_VERSION_STRING (core/version.hpp)."""
from ._core import __version__

__all__ = ["__version__"]
