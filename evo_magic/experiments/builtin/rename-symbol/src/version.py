"""version: nothing to do with rows."""

VALUE = "version"
