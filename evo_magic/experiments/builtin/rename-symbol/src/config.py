"""config: nothing to do with rows."""

VALUE = "config"
