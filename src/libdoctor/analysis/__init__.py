"""One run of the checks over a target: the plain path, and the forked overlap."""
