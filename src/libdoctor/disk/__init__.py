"""The disk's side of the story: one stat per file, and hashing with its cache."""
