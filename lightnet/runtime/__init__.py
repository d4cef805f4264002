"""Running a model: Context (one model's tensors, ops, memory and weights) and Session
(compile once, run many times)."""
