"""Scenarios: YAML schema, network frontends (built-in, ONNX, layer lists), weights, the float32
reference, INT8 quantisation, and the runner behind `nvdla-sim run`."""
