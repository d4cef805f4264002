"""Files a model comes in: a model as a user names it (a JSON IR, a lightnet.nn Model, an
ONNX model) and weight files (.npz, LightNet's .wts)."""
