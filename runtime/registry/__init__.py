"""The capability registry: tools, their specs, validation of arguments, loading tool modules."""
