"""Migration revisions, oldest first by their numeric prefix."""
