"""An uninstall or install applied to the model, and the findings that change."""
