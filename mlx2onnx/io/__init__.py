"""Files: atomic writes with external data, and the metadata keys an export writes."""
