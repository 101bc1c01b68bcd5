"""util: nothing to do with rows."""

VALUE = "util"
