"""The capability registry: tools, their specs, validation of arguments."""
