"""A reference engine that behaves like ft serve on the wire (see ``refengine.cli``)."""

from refengine.server import create_app

__all__ = ["create_app"]
