"""How items get to scorers: the dispatch interface and the embedded worker pool."""
