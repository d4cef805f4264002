"""The one error type users meet, and the one message format it speaks."""


class LightNetError(Exception):
    """A problem with the user's input: a model, weight file, argument or option.

    Anything raised as LightNetError is shown to the user as one line; anything
    else escaping the runtime is a bug in LightNet. The message quotes names
    from the user's files, so characters that are not printable (a newline in
    a name, a lone surrogate) are written as escapes: the line stays one line
    and can always be printed.
    """

    def __init__(self, message="", *args):
        super().__init__(one_line(str(message)), *args)


def one_line(text: str) -> str:
    """`text` with every unprintable character escaped (newline as \\n)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape",
                                                      "backslashreplace").decode("ascii")
                   for c in text)


class LightNetWarning(UserWarning):
    """Something in the user's input LightNet passes over (a weight the model
    does not read, an op named for another architecture); the commands print
    it as one `warning:` line."""


class CheckError(LightNetError):
    """An operator check failed.

    The message names the op, its optype, the argument, the rule, what was
    expected and what was found:
    ``op 'slice1' (slice): param 'axis': ge: expected axis >= 0, found -1``
    """

    def __init__(self, op_name, optype, arg, rule, expected, found):
        self.op_name = op_name
        self.optype = optype
        self.arg = arg
        self.rule = rule
        self.expected = expected
        self.found = found
        super().__init__(
            f"op '{op_name}' ({optype}): {arg}: {rule}: "
            f"expected {expected}, found {found}"
        )
