"""Errors raised by the lab (a lab that cannot start fails the test loudly; it never skips)."""


class LabError(RuntimeError):
    """Something in the lab itself failed: build, start, SSH, teardown."""
