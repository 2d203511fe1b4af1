"""hostcheck: is this machine fit, and safe, to rent out its GPU?"""

__version__ = "0.1.0"
