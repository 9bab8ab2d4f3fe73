"""Context views: the part of a thread that fits a model's context window."""
