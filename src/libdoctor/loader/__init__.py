"""glibc's loader, emulated: a pure search over a configuration read from the system."""
