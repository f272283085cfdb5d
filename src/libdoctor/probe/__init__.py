"""The one reader that runs target code: import in the target's interpreter, read its maps."""
