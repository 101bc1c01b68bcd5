"""The protocol's example strategy (evo_magic.compact.base's docstring), for the tests: used as
a class, and its source pasted into a notebook cell."""


class KeepLastTurns:
    """Summarise all but the last n user turns; those stay verbatim."""

    name = "keep-last-turns"
    when = "over_limit"

    def __init__(self, n=2):
        self.n = n

    def compact(self, messages, ctx):
        starts = ctx.user_turn_starts(messages)
        if len(starts) <= self.n:
            return None
        cut = starts[-self.n]
        summary = ctx.summarise(messages[:cut], ctx.focus)
        return [ctx.compacted_message(summary), *messages[cut:]]
