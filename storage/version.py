"""The one place the sessiontape version is written."""

__version__ = "0.4.0"
