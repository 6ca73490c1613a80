"""nanobench: does compiling or capturing your decode step pay off here, and if not, why not."""

__version__ = "0.1.0"
