"""From a checked model to a planned one: the optimizer rules' runtime, the passes that
rewrite the op list, the pipeline that orders them, memory planning, and what a target
names."""
