"""The one error of the Timeloop adapter."""


class TimeloopError(ValueError):
    """A Timeloop input that cannot be read or uses a construct this reader does not support;
    the message is one line naming the file, key or construct."""
