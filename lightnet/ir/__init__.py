"""What a model is: tensors, params, ops and their checks, the graphs over them, the
JSON IR, symbolic dims, the limits on what a model may ask, and models built in
Python (lightnet.nn)."""
