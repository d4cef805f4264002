"""Front-ends: convert other model formats (the IL, ...) to LightNet's JSON IR."""
