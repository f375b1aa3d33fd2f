"""Translate: dispatch each primitive record to its handler (``op_mappings/``) and
assemble the ONNX model (onnx-ir), before any optimisation."""
