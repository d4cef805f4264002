"""The LightNet generator: YAML descriptions in, Python op and optimizer modules out.

descriptions/ -> source (YAML with line numbers) -> model (validated frozen
dataclasses, inheritance resolved) -> render (jinja templates + black) ->
output (atomic write, or --check).
"""
