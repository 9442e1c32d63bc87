"""Inverse maps: parameters, simulated experiments, training data, MLP/GP maps, ONNX export, evaluation
(IMPU method, paper file 000). See docs/inverse.md."""
