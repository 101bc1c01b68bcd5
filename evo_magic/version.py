"""The package's version, written once (pyproject reads it from here; `evo_magic.__version__`
re-exports it), in a module of its own so that any part can name it without importing the
package's top."""

__version__ = "0.2.0"
