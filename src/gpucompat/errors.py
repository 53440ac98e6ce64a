"""The one exception a user can cause: the CLI prints its sentence and exits 2."""


class UserError(Exception):
    """Something the user gave us is wrong; the message says what and what to do."""
